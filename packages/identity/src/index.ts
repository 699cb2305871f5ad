export {
  createIdentity,
  type DidDocument,
  type Identity,
  type IdentityOptions,
  type ResolvedIdentity,
} from './identity.ts'
export { lookupFailure } from './failures.ts'
