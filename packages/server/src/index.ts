export {
  startServer,
  type DataplaneServer,
  type HealthReport,
  type ServerOptions,
} from './server.ts'
export { buildRoutes, implementedMethods, type RouteContext, type Routes } from './routes/index.ts'
