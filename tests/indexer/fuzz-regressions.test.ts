// Sequences on which openplane once ended different from the stock indexer, each as the indexer
// fuzzer printed it (shrunk), at batch size 1 and 500 (one batch) and, where the fuzzer found it
// at another size, that one too. Counters are compared with the stock's rows recounted.
import { describe, it } from 'vitest'
import { useFuzzer } from '../harness/fuzz/vitest.ts'

const BOTH = { batchSizes: [1, 500] }

describe('indexer equals the stock indexer on', () => {
  const { expectSameAsStock } = useFuzzer()

  it('a deleted account: its likes, reposts, replies and follows come off the counters they fed', async () => {
    await expectSameAsStock(
      [
        { by: 'B', ops: [{ create: 'post', rkey: 'p1', text: 'hello' }] },
        { by: 'A', ops: [{ create: 'like', rkey: 'l1', subject: 'B/post/p1' }] },
        { by: 'A', ops: [{ create: 'repost', rkey: 'r1', subject: 'B/post/p1' }] },
        {
          by: 'A',
          ops: [{ create: 'post', rkey: 'p2', text: 'a reply', reply: ['B/post/p1', 'B/post/p1'] }],
        },
        { by: 'A', ops: [{ create: 'post', rkey: 'p3', text: 'a quote', quote: 'B/post/p1' }] },
        { by: 'A', ops: [{ create: 'follow', rkey: 'f1', subject: 'B' }] },
        { by: 'A', account: 'deleted' },
        { by: 'C', ops: [{ create: 'like', rkey: 'l1', subject: 'B/post/p1' }] },
        { by: 'C', ops: [{ create: 'repost', rkey: 'r1', subject: 'B/post/p1' }] },
        {
          by: 'C',
          ops: [{ create: 'post', rkey: 'p2', text: 'reply', reply: ['B/post/p1', 'B/post/p1'] }],
        },
        { by: 'C', ops: [{ create: 'follow', rkey: 'f1', subject: 'B' }] },
      ],
      BOTH,
    )
  })

  it('a deleted account whose interactions share its batch: no notification by or to it survives', async () => {
    await expectSameAsStock(
      [
        { by: 'A', ops: [{ create: 'post', rkey: 'p1', text: 'mine' }] },
        { by: 'B', ops: [{ create: 'post', rkey: 'p1', text: 'theirs' }] },
        { by: 'A', ops: [{ create: 'like', rkey: 'l1', subject: 'B/post/p1' }] },
        {
          by: 'A',
          ops: [{ create: 'post', rkey: 'p2', reply: ['B/post/p1', 'B/post/p1'], mention: 'B' }],
        },
        { by: 'A', ops: [{ create: 'follow', rkey: 'f1', subject: 'B' }] },
        { by: 'B', ops: [{ create: 'like', rkey: 'l1', subject: 'A/post/p1' }] },
        { by: 'B', ops: [{ create: 'follow', rkey: 'f1', subject: 'A' }] },
        { by: 'A', account: 'deleted' },
      ],
      BOTH,
    )
  })

  it('a deleted post: its quote count goes with the quotes of it', async () => {
    await expectSameAsStock(
      [
        { by: 'A', ops: [{ create: 'post', rkey: 'p1', text: 'quoted' }] },
        { by: 'B', ops: [{ create: 'post', rkey: 'p1', quote: 'A/post/p1' }] },
        { by: 'A', ops: [{ delete: 'post', rkey: 'p1' }] },
        { by: 'A', ops: [{ create: 'post', rkey: 'p1', text: 'again' }] },
        { by: 'B', ops: [{ delete: 'post', rkey: 'p1' }] },
      ],
      BOTH,
    )
  })

  it('an actor first seen in a batch keeps its verified handle for a day (seed 9)', async () => {
    await expectSameAsStock(
      [
        { by: 'C', ops: [{ create: 'repost', rkey: 'r41' }] },
        { by: 'A', ops: [{ delete: 'like', rkey: 'l1' }], dt: 7200 },
        { by: 'C', ops: [{ create: 'repost', rkey: 'r52' }] },
      ],
      { batchSizes: [1, 500, 30] },
    )
  })

  it('an account deleted and active again in one batch gets its actor row back (seed 9)', async () => {
    await expectSameAsStock(
      [
        { by: 'B', identity: { handle: 'b33.test' } },
        { by: 'B', account: 'deleted' },
        { by: 'B', ops: [{ create: 'post', rkey: 'p37' }] },
      ],
      { batchSizes: [1, 500, 30] },
    )
  })

  it('a handle taken back, then a re-check two days later (seed 134)', async () => {
    await expectSameAsStock(
      [
        { by: 'A', identity: { handle: 'b.test' } },
        { by: 'B', identity: { handle: 'b.test' } },
        { by: 'A', ops: [{ delete: 'follow', rkey: 'f15' }], dt: 172800 },
        { by: 'B', ops: [{ delete: 'repost', rkey: 'r35' }] },
        { by: 'A', ops: [{ create: 'like', rkey: 'l41' }] },
      ],
      { batchSizes: [1, 500, 14] },
    )
  })

  it('a post re-created at its uri after its account was deleted: fanned out once (seed 13)', async () => {
    await expectSameAsStock(
      [
        { by: 'A', ops: [{ create: 'post', rkey: 'p10' }] },
        { by: 'A', account: 'deleted' },
        { by: 'A', ops: [{ create: 'post', rkey: 'p10' }] },
      ],
      { batchSizes: [1, 500, 11] },
    )
  })

  it('updates of record-only records never seen: created, except at rkey self (seed 10)', async () => {
    await expectSameAsStock(
      [
        { by: 'A', ops: [{ update: 'status', rkey: 's61' }] },
        { by: 'A', ops: [{ update: 'status', rkey: 'self' }] },
        {
          by: 'B',
          ops: [
            { update: 'chat', rkey: 'self' },
            { update: 'notifdecl', rkey: 'n1' },
          ],
        },
      ],
      BOTH,
    )
  })

  it('a thread gate created again after its post: the post gets the flag (seed 143)', async () => {
    await expectSameAsStock(
      [
        { by: 'A', ops: [{ create: 'threadgate', rkey: 'p13' }] },
        { by: 'A', ops: [{ create: 'post', rkey: 'p13' }] },
        { by: 'A', ops: [{ create: 'threadgate', rkey: 'p13' }] },
        { by: 'A', ops: [{ create: 'postgate', rkey: 'p13' }] },
        { by: 'A', ops: [{ update: 'postgate', rkey: 'p13', noEmbed: true }] },
      ],
      { batchSizes: [1, 500, 6] },
    )
  })

  it('a quote and the deletion of the quoted post in one commit (seed 186)', async () => {
    await expectSameAsStock(
      [
        {
          by: 'A',
          ops: [
            { create: 'post', rkey: 'p27', quote: 'A/post/p3' },
            { delete: 'post', rkey: 'p3' },
          ],
        },
      ],
      { batchSizes: [1, 500, 21] },
    )
  })

  it('a record created again at its uri, then a record taking its new subject: no duplicate (seed 38)', async () => {
    await expectSameAsStock(
      [
        { by: 'A', ops: [{ update: 'repost', rkey: 'r9' }] },
        {
          by: 'A',
          ops: [
            { create: 'repost', rkey: 'r9', subject: 'B/post/p3' },
            { create: 'repost', rkey: 'r11', subject: 'B/post/p3' },
          ],
        },
      ],
      { batchSizes: [1, 500, 19] },
    )
  })

  it('a record whose duplicate slot is held by a row older than the run, re-created in it (seed 552232191)', async () => {
    await expectSameAsStock(
      [
        { by: 'A', ops: [{ update: 'like', rkey: 'l19', subject: 'C/post/p14' }] },
        {
          by: 'A',
          ops: [
            { create: 'like', rkey: 'l18', subject: 'C/post/p14' },
            { create: 'like', rkey: 'l19' },
          ],
        },
      ],
      { batchSizes: [1, 500, 24] },
    )
  })

  it('media blobs whose ref is a { $link } map in the CBOR: the record is refused', async () => {
    await expectSameAsStock(
      [
        { by: 'B', ops: [{ create: 'post', rkey: 'p57', media: 'images', jsonShapedBlob: true }] },
        { by: 'C', ops: [{ create: 'post', rkey: 'p84', media: 'video', jsonShapedBlob: true }] },
        { by: 'C', ops: [{ create: 'post', rkey: 'p85', media: 'images' }] },
      ],
      BOTH,
    )
  })

  // A batch planned while the one before it is written reads actors from before that commit: it
  // must still see a handle that batch took from another actor (who, now without one, is
  // re-checked an hour later).
  it('a handle taken in the batch before, then its old holder two hours later (seed 20000072)', async () => {
    await expectSameAsStock(
      [
        { by: 'C', ops: [{ create: 'like', rkey: 'l22' }] },
        { by: 'A', identity: { handle: 'c.test' }, dt: 7200 },
        { by: 'C', ops: [{ delete: 'like', rkey: 'l22' }] },
      ],
      BOTH,
    )
  })

  it('a handle taken, then its old holder deletes a post (seed 20000035)', async () => {
    await expectSameAsStock(
      [
        { by: 'C', ops: [{ create: 'post', rkey: 'p16' }] },
        { by: 'B', ops: [{ create: 'repost', rkey: 'r22' }], dt: 7200 },
        { by: 'A', identity: { handle: 'c.test' } },
        { by: 'C', ops: [{ delete: 'post', rkey: 'p16' }] },
      ],
      BOTH,
    )
  })

  it('a handle taken while its old holder is deactivated (seed 20000206)', async () => {
    await expectSameAsStock(
      [
        { by: 'C', ops: [{ create: 'verification', rkey: 'v7' }] },
        { by: 'A', ops: [{ create: 'list', rkey: 'l8' }], dt: 7200 },
        { by: 'A', identity: { handle: 'c.test' } },
        { by: 'C', ops: [{ delete: 'post', rkey: 'p17' }] },
      ],
      BOTH,
    )
  })

  it('a handle passed on twice, the first holder suspended (seed 20000219)', async () => {
    await expectSameAsStock(
      [
        { by: 'A', identity: { handle: 'd.test' } },
        { by: 'C', ops: [{ create: 'like', rkey: 'l33' }], dt: 7200 },
        { by: 'B', identity: { handle: 'd.test' } },
        { by: 'A', ops: [{ delete: 'post', rkey: 'p22' }] },
      ],
      BOTH,
    )
  })

  it('a handle taken inside a batch of seven planned ahead (seed 20000204)', async () => {
    await expectSameAsStock(
      [
        { by: 'F', ops: [{ create: 'follow', rkey: 'f3' }] },
        { by: 'A', identity: { handle: 'f.test' } },
        { by: 'A', ops: [{ create: 'post', rkey: 'p9' }], dt: 7200 },
        { by: 'C', ops: [{ create: 'notifdecl', rkey: 'self' }] },
        { by: 'A', ops: [{ create: 'like', rkey: 'l15' }] },
        { by: 'A', ops: [{ create: 'generator', rkey: 'g16' }] },
        { by: 'E', ops: [{ delete: 'like', rkey: 'l19' }] },
        { by: 'A', ops: [{ update: 'post', rkey: 'p9' }] },
        { by: 'F', ops: [{ create: 'generator', rkey: 'g21' }] },
      ],
      { batchSizes: [1, 500, 7] },
    )
  })

  it("a deleted account's post created again after the deletion, in the same batch", async () => {
    // The rows the writer keeps between batches must not outlive the account's deletion.
    await expectSameAsStock(
      [
        { by: 'A', ops: [{ create: 'post', rkey: 'p15' }] },
        { by: 'A', identity: { handle: 'a18.test' } },
        { by: 'A', account: 'deleted' },
        { by: 'A', ops: [{ create: 'post', rkey: 'p15' }] },
      ],
      { batchSizes: [1, 500, 3, Infinity] },
    )
  })
})
