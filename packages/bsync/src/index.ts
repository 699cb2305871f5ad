export {
  BsyncConsumer,
  STREAMS,
  type BsyncCursors,
  type BsyncOptions,
  type StreamName,
  type StreamState,
} from './consumer.ts'
export { NAMESPACES } from './ops.ts'
// The fold of a page into row changes, pure (tested on its own).
export { muteChange, notifChange, privateOp, Skip } from './ops.ts'
export { Clock, planMutes, planNotifs, planOperations, type OperationPlan } from './plan.ts'
