export { logger, childLogger, type Logger } from './logger.ts'
export { registry, counter, gauge, histogram } from './metrics.ts'
export { throttle, type Throttle } from './throttle.ts'
export { BUSY_LAG_MS, loopLagMaxMs, loopLagMs, onLoopLag, Overloaded } from './loop-lag.ts'
