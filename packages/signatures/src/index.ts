export { signatureBackend, verifySignature } from './verify.ts'
