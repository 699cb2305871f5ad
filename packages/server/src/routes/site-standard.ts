import type { RouteContext, Routes } from './context.ts'

// The stock indexes no site.standard records and answers every lookup with nothing.
export default (_ctx: RouteContext): Routes => ({
  async getSiteStandardRecordsByURI() {
    return { documents: [], publications: [] }
  },
  async getSiteStandardRecordsByRef() {
    return { documents: [], publications: [] }
  },
})
