export { LabelConsumer, type LabelerState, type LabelsOptions } from './consumer.ts'
export { checkLabel, signedBy, type LabelRow } from './label.ts'
export { newestPerKey } from './apply.ts'
