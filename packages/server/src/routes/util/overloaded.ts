import { Code, ConnectError } from '@connectrpc/connect'

/**
 * The answer to an rpc refused because this process is past its capacity: resource_exhausted,
 * which the stock AppView does not retry (a retry storm would only add load).
 */
export function overloaded(): ConnectError {
  return new ConnectError('the server is overloaded; try again later', Code.ResourceExhausted)
}
