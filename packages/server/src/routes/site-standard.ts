import type { RouteContext, Routes } from './context.ts'

export default (_ctx: RouteContext): Routes => ({})
