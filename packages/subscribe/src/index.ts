// @openplane/subscribe: `/subscribe`, what openplane committed as a Jetstream stream.
export { startSubscribe, type SubscribeOptions, type SubscribeServer } from './server.ts'
export { filterFromMessage, filterFromQuery, makeFilter, wants, type Filter } from './filter.ts'
export { FrameReader, frame, textFrame, closeFrame, handshakeReply, OPCODE } from './websocket.ts'
