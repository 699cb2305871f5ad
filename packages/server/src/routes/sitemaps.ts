import { gzipSync } from 'node:zlib'
import { Code, ConnectError } from '@connectrpc/connect'
import type { RouteContext, Routes } from './context.ts'

// The stock serves fixed placeholder sitemaps (one index, one page for 2025-01-01 bucket 1);
// these are the same documents, byte for byte once gzipped.
const SITEMAP_INDEX = `<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap>
    <loc>https://bsky.app/sitemap/users/2025-01-01/1.xml.gz</loc>
  </sitemap>
</sitemapindex>`

const SITEMAP_PAGE = `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url>
    <loc>https://bsky.app/profile/test.bsky.social</loc>
  </url>
</urlset>`

export default (_ctx: RouteContext): Routes => ({
  async getSitemapIndex() {
    return { sitemap: gzipSync(SITEMAP_INDEX) }
  },

  // The AppView sends the page's date as local midnight, so it is read back in local time.
  async getSitemapPage(req) {
    const date = req.date?.toDate()
    const isPage = date?.getFullYear() === 2025 && date.getMonth() === 0 && date.getDate() === 1
    if (!isPage || req.bucket !== 1) {
      throw new ConnectError('Sitemap page not found', Code.NotFound)
    }
    return { sitemap: gzipSync(SITEMAP_PAGE) }
  },
})
