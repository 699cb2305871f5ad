export { signatureBackend, verifySignature } from './verify.ts'
export { signingKeyOf } from './did-key.ts'
