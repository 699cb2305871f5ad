// How a handler's failure is answered, for the cases no server-level test plays.
// Work refused because the process is past its capacity (Overloaded, thrown by the timeline
// reader when its store's answer came later than a busy process could wait) reaches the caller
// as resource_exhausted, which the AppView does not retry, on either lane: never as internal or
// unavailable, which it would retry elsewhere or report as an outage.
import { Code, ConnectError } from '@connectrpc/connect'
import { Overloaded } from '@openplane/telemetry'
import { describe, expect, it } from 'vitest'
import { classify } from '../../packages/server/src/errors.ts'

describe('an overloaded answer', () => {
  it('is resource_exhausted, bare or wrapped by Connect, and logs nothing', () => {
    for (const err of [
      new Overloaded('busy'),
      new ConnectError('x', Code.Unknown, undefined, undefined, new Overloaded('busy')),
    ]) {
      const { error, requestId } = classify(err)
      expect(error.code).toBe(Code.ResourceExhausted)
      expect(error.rawMessage).toBe('the server is overloaded; try again later')
      expect(requestId).toBeUndefined()
    }
    expect(classify(new Error('other')).error.code).toBe(Code.Internal)
  })

  it('treats a network failure deep in the cause chain as unavailable', () => {
    // What fetch throws when the PLC directory's host is unknown or refuses the connection.
    const dns = Object.assign(new Error('getaddrinfo ENOTFOUND plc.example'), { code: 'ENOTFOUND' })
    const fetchFailed = new TypeError('fetch failed', { cause: dns })
    const { error, requestId } = classify(new Error('resolving failed', { cause: fetchFailed }))
    expect(error.code).toBe(Code.Unavailable)
    expect(requestId).toBeDefined()
    expect(classify(new TypeError('fetch failed', { cause: new Error('x') })).error.code).toBe(
      Code.Internal,
    )
  })
})
