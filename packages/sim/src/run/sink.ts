// Where a run sends its posts and follows: anything with these two methods. The firehose emitter
// satisfies it structurally; tests use sinks that record the calls.

/** What a created post is known by; the firehose-lag probes look for `uri` in timelines. */
export interface PostRef {
  uri: string
}

export interface EventSink {
  /** Creates a post by user `userId`; resolves once it is emitted. */
  post(userId: number): Promise<PostRef | void>
  /** User `userId` follows user `subjectId`; resolves once it is emitted. */
  follow(userId: number, subjectId: number): Promise<unknown>
}

/** A sink that is closed when its run is over. */
export interface ClosableSink extends EventSink {
  close?(): Promise<void> | void
}
