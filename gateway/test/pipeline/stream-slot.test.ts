// Stage stream slot: so many live streams per caller; past them 429 TOO_MANY_STREAMS and the place back.
import { expect } from "chai";
import { EdgeCall } from "../../src/pipeline/edge-call.js";
import { streamSlotStage } from "../../src/pipeline/stream-slot.js";
import { AdaptiveConcurrencyLimit } from "../../src/runtime/concurrency-limit.js";
import { StreamSlots } from "../../src/runtime/streams.js";
import { ADDRESS, record } from "./fixtures.js";

describe("pipeline: stream slot", () => {
  const call = (key: string) => Object.assign(new EdgeCall(ADDRESS, record(), {}), { quotaKey: key });

  it("gives each caller up to the maximum of slots, and one back when a stream closes", () => {
    const slots = new StreamSlots(2);
    const take = streamSlotStage(slots, 2);
    const first = call("user:acme:7");
    expect(take(first)).to.equal(undefined);
    expect(take(call("user:acme:7"))).to.equal(undefined);
    expect(take(call("user:acme:8")), "another caller's slots are their own").to.equal(undefined);
    expect(slots.size).to.equal(3);
    first.slot!();
    expect(slots.size).to.equal(2);
    expect(take(call("user:acme:7")), "the slot given back is free again").to.equal(undefined);
  });

  it("refuses one more with 429 TOO_MANY_STREAMS and Retry-After 5, said to the access record, the place in the limit given back", () => {
    const take = streamSlotStage(new StreamSlots(1), 1);
    expect(take(call("addr:192.0.2.1"))).to.equal(undefined);
    const concurrency = new AdaptiveConcurrencyLimit({ initialLimit: 1, minLimit: 1, maxLimit: 1 });
    const refused = call("addr:192.0.2.1");
    refused.release = concurrency.tryAcquire();
    const refusal = take(refused);
    expect(refusal?.status).to.equal(429);
    expect(refusal?.code).to.equal("TOO_MANY_STREAMS");
    expect(refusal?.message).to.equal("at most 1 live streams at once; close one first");
    expect(refusal?.headers["retry-after"]).to.equal("5");
    expect(refused.record.quotaKind).to.equal("streams");
    expect(refused.slot).to.equal(undefined);
    expect(concurrency.inflight).to.equal(0);
  });
});
