// The stock AppView as production runs it: ServerConfig.readEnv() + the signing key from env.
// The only test addition: `*.test` handles resolve through the test PDS (TEST_PDS_URL), which
// dev-env does in-process for its own AppView, since no DNS knows them.
import { BskyAppView, ServerConfig } from '@atproto/bsky'
import { Secp256k1Keypair } from '@atproto/crypto'
import { mockResolvers } from '@atproto/dev-env'

const config = ServerConfig.readEnv()
const signingKey = await Secp256k1Keypair.import(process.env.BSKY_SERVICE_SIGNING_KEY!)
const server = BskyAppView.create({ config, signingKey })
const pdsUrl = process.env.TEST_PDS_URL
if (pdsUrl) {
  const u = new URL(pdsUrl)
  const fakePds = {
    url: pdsUrl,
    port: Number(u.port),
    ctx: { cfg: { service: { publicUrl: pdsUrl }, identity: { serviceHandleDomains: ['.test'] } } },
  }
  mockResolvers(server.ctx.idResolver, fakePds as never)
}
await server.start()
const stop = async () => {
  await server.destroy()
  process.exit(0)
}
process.once('SIGTERM', () => void stop())
process.once('SIGINT', () => void stop())
