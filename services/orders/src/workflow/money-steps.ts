// Paying and cancelling an order: the steps that move money between orders and payments.
//
// A step is done as a payments engineer would trust it:
//   1. intent — in the transaction that checks the guard, the step is recorded with its amount and
//      the idempotency key it will use (from the order and the attempt number, under orders' own
//      secret; payments keeps it in orders' own key scope, where no user's key can meet it);
//   2. the call — payments is asked to charge or refund under that key, with the caller's deadline;
//   3. outcome — what payments answered is recorded with the status change it brings, once it is
//      checked to be the step's (amount, currency, reference, owner): anything else is never believed.
// While a step is unsettled the order refuses edits, other actions and a second pay or cancel.
// When the answer never comes (a crash, a deadline, a dropped connection), payments is asked what
// happened under the key: it answers with what was made, or voids the key so that nothing ever will
// be — a final answer either way. The caller does that at once; the reconciler (reconciler.ts)
// does it for every step still unsettled past its deadline. So, whatever fails and whenever:
//   - a paid or shipped order has exactly one charge of its total, and an unpaid one none;
//   - a cancelled order that was charged has been refunded all of it;
//   - no step stays unsettled longer than its deadline plus the reconcile interval (payments up).
import { ConnectError } from "@connectrpc/connect";
import {
  KeyedOperation,
  type Payment,
  type PaymentService,
  type Refund,
} from "@switchyard/gen/switchyard/payments/v1/payments_pb.js";
import { errorInfoOf, fail } from "@switchyard/platform/errors.js";
import { callFields, type Logger } from "@switchyard/platform/logger.js";
import { SERVICE_AUTHORIZATION, type Caller } from "@switchyard/platform/caller.js";
import { downstreamOptions } from "@switchyard/platform/auth.js";
import { downstreamTimeoutMs, passedOn, remainingMs, type CallScope } from "@switchyard/platform/call-deadline.js";
import { callScopeOf, type Client } from "@switchyard/platform/grpc";
import { Faults } from "@switchyard/platform/faults.js";
import { moneyStepMismatches } from "@switchyard/platform/metrics.js";
import type { ServiceCredentials } from "@switchyard/platform/service-credentials.js";
import type { HandlerContext } from "@connectrpc/connect";
import { visibleOrder } from "../domain/access.js";
import { totalsOf } from "../domain/orders.js";
import { guardTransition } from "../domain/state-machine.js";
import {
  chargeMismatch,
  guardNoStepInProgress,
  STEP_NAMES,
  orderReference,
  refundMismatch,
  STEP_DEADLINE_SLACK_MS,
  stepCallMs,
  stepIdempotencyKey,
  type StepKind,
} from "../domain/steps.js";
import type { OrderRecord, OrdersStore, StepOutcome, StepRecord } from "../store/port.js";
import { movedNoMoney } from "./call-outcome.js";

/** The fault points of orders (FAULTS, tests only): a crash at the worst moments of a step. */
export const ORDERS_FAULT_POINTS = [
  "orders.exit-after-intent",
  "orders.exit-after-charge",
  "orders.exit-after-refund",
] as const;

/** How long asking payments about a key may take. */
const RESOLVE_TIMEOUT_MS = 3_000;

export interface MoneyStepsDeps {
  store: OrdersStore;
  payments: Client<typeof PaymentService>;
  credentials: ServiceCredentials;
  logger: Logger;
  faults?: Faults;
  /** Orders' own secret for its step keys (stepIdempotencyKey). */
  stepKeySecret: Uint8Array;
}

/** What payments answered for a step: the payment of a charge, or the refund of a refund. */
type Answer = { case: "payment"; value: Payment } | { case: "refund"; value: Refund };

const OPERATION: Record<StepKind, KeyedOperation> = {
  charge: KeyedOperation.CREATE_PAYMENT,
  refund: KeyedOperation.CREATE_REFUND,
};

/**
 * The deadline of a step's call to payments, taken when the call is made: what the call has left once
 * its intent is recorded, less the margin to settle and answer in. (Taken before the intent's
 * transaction, the margin would go to that transaction under load, and the caller's deadline would
 * pass while the step settles: 504 instead of the refusal the step came to.)
 */
function callTimeoutMs(ctx: HandlerContext): number {
  return stepCallMs(downstreamTimeoutMs(ctx.timeoutMs()));
}

export class MoneySteps {
  private readonly faults: Faults;

  constructor(private readonly deps: MoneyStepsDeps) {
    this.faults = deps.faults ?? new Faults();
  }

  /** pending → paid: the order's total charged through payments, for the order's owner. */
  async pay(
    caller: Caller,
    orderId: bigint,
    source: string,
    ctx: HandlerContext,
  ): Promise<{ order: OrderRecord; paymentId: string }> {
    const serviceToken = await this.deps.credentials.token();
    const callMs = stepCallMs(downstreamTimeoutMs(ctx.timeoutMs()));
    const call = callScopeOf(ctx);
    const { order, step } = await this.deps.store.act(
      caller.tenantId,
      orderId,
      (o) => {
        visibleOrder(caller, o);
        guardNoStepInProgress(o);
        guardTransition("pay", o.status);
        const { total } = totalsOf(o.items, o.discounts);
        if (total <= 0n)
          throw fail("RULE_VIOLATION", "the order total is zero: there is nothing to pay", { field: "total" });
        return {
          kind: "step",
          step: "charge",
          amount: total,
          currency: o.currency,
          paymentId: "",
          keyFor: (n) =>
            stepIdempotencyKey(this.deps.stepKeySecret, {
              tenantId: o.tenantId,
              orderId: o.id,
              kind: "charge",
              attempt: n,
            }),
          deadlineMs: callMs + STEP_DEADLINE_SLACK_MS,
        };
      },
      call,
    );
    this.faults.crashIfFires("orders.exit-after-intent");
    let payment: Payment;
    try {
      ({ payment } = (await this.deps.payments.createPayment(
        {
          idempotencyKey: step!.idempotencyKey,
          amount: step!.amount,
          currency: step!.currency,
          source,
          ownerUserId: order.userId,
          reference: orderReference(order.id),
        },
        { ...downstreamOptions(caller, ctx, serviceToken), timeoutMs: callTimeoutMs(ctx) },
      )) as { payment: Payment });
    } catch (err) {
      const settled = await this.afterFailedCall(step!, err, call);
      return { order: settled, paymentId: settled.paymentId };
    }
    this.faults.crashIfFires("orders.exit-after-charge");
    const settled = await this.settle(
      step!,
      this.believed(step!, order.userId, { case: "payment", value: payment }, { note: "charged", call }),
      call,
    );
    if (settled.status !== "paid") throw notBelieved(step!);
    return { order: settled, paymentId: settled.paymentId };
  }

  /** pending → cancelled at once; paid → cancelled once payments has refunded what is left of the charge. */
  async cancel(
    caller: Caller,
    orderId: bigint,
    ctx: HandlerContext,
  ): Promise<{ order: OrderRecord; refundId: string }> {
    const serviceToken = await this.deps.credentials.token();
    const callMs = stepCallMs(downstreamTimeoutMs(ctx.timeoutMs()));
    const call = callScopeOf(ctx);
    const { order, step } = await this.deps.store.act(
      caller.tenantId,
      orderId,
      (o) => {
        visibleOrder(caller, o);
        guardNoStepInProgress(o);
        const to = guardTransition("cancel", o.status);
        if (o.status !== "paid") return { kind: "transition", to };
        const { total } = totalsOf(o.items, o.discounts);
        return {
          kind: "step",
          step: "refund",
          amount: total,
          currency: o.currency,
          paymentId: o.paymentId,
          keyFor: (n) =>
            stepIdempotencyKey(this.deps.stepKeySecret, {
              tenantId: o.tenantId,
              orderId: o.id,
              kind: "refund",
              attempt: n,
            }),
          deadlineMs: callMs + STEP_DEADLINE_SLACK_MS,
        };
      },
      call,
    );
    if (!step) return { order: order, refundId: "" };
    this.faults.crashIfFires("orders.exit-after-intent");
    let refund: Refund;
    try {
      // All that is not refunded yet: an admin may have refunded part of the payment before.
      ({ refund } = (await this.deps.payments.createRefund(
        {
          idempotencyKey: step.idempotencyKey,
          paymentId: step.paymentId,
          refundRemaining: true,
          reason: "order cancelled",
        },
        { ...downstreamOptions(caller, ctx, serviceToken), timeoutMs: callTimeoutMs(ctx) },
      )) as { refund: Refund });
    } catch (err) {
      if (err instanceof ConnectError && errorInfoOf(err)?.reason === "NOTHING_TO_REFUND") {
        return {
          order: await this.settle(
            step,
            { moved: true, refundId: "", note: "the payment had been refunded in full already" },
            call,
          ),
          refundId: "",
        };
      }
      const settled = await this.afterFailedCall(step, err, call);
      return { order: settled, refundId: settled.refundId };
    }
    this.faults.crashIfFires("orders.exit-after-refund");
    const settled = await this.settle(
      step,
      this.believed(step, order.userId, { case: "refund", value: refund }, { note: "refunded", call }),
      call,
    );
    if (settled.status !== "cancelled") throw notBelieved(step);
    return { order: settled, refundId: settled.refundId };
  }

  /**
   * Settles an unsettled step by asking payments what happened under its key (the reconciler's
   * work, and the caller's own after a call whose answer it never got). Throws when payments cannot
   * be asked now: the step stays unsettled for the next try. `call`: the caller's call, when it is
   * the caller's own (the reconciler's work is no call's).
   */
  async resolve(step: StepRecord, call?: CallScope): Promise<OrderRecord> {
    const serviceToken = await this.deps.credentials.token();
    const { outcome } = await this.deps.payments.resolveIdempotencyKey(
      { tenantId: step.tenantId, operation: OPERATION[step.kind], idempotencyKey: step.idempotencyKey },
      {
        headers: { ...passedOn(call), [SERVICE_AUTHORIZATION]: `Bearer ${serviceToken}` },
        // Within a call, no longer than the call has left (it waits for a reachable payments replica
        // until then); the reconciler, outside any call, gives it its own bound.
        timeoutMs: Math.min(RESOLVE_TIMEOUT_MS, downstreamTimeoutMs(remainingMs(call)) ?? RESOLVE_TIMEOUT_MS),
      },
    );
    const found: StepOutcome =
      outcome.case === "payment" || outcome.case === "refund"
        ? this.believed(step, (await this.current(step)).userId, outcome, {
            note: `${outcome.case === "payment" ? "charged" : "refunded"} (settled by asking payments)`,
            call,
          })
        : { moved: false, note: "nothing was made under the key; the key is void (rolled back)" };
    const settled = await this.deps.store.settleStep(step, found, call);
    if (!settled) return this.current(step);
    this.deps.logger.info(
      {
        ...callFields(call),
        orderId: step.orderId.toString(),
        tenantId: step.tenantId,
        step: step.kind,
        attempt: step.attempt,
        outcome: found.moved ? "completed" : "rolled back",
      },
      "settled an order's money step",
    );
    return settled;
  }

  /**
   * A call that failed: when it certainly moved no money, the step fails and the order stays as it
   * was; when that is unknown, payments is asked at once (the call is over on our side). Answers the
   * order when the money did move after all; throws the call's error otherwise.
   */
  private async afterFailedCall(step: StepRecord, err: unknown, call: CallScope): Promise<OrderRecord> {
    const error = ConnectError.from(err);
    if (movedNoMoney(error)) {
      await this.settle(
        step,
        { moved: false, note: `payments refused: ${errorInfoOf(error)?.reason ?? error.code}` },
        call,
      );
      throw this.forTheUser(step, error, call);
    }
    const settled = await this.resolve(step, call).catch((resolveErr: unknown) => {
      this.deps.logger.warn(
        { ...callFields(call), orderId: step.orderId.toString(), step: step.kind, message: String(resolveErr) },
        "could not settle an order's money step yet; the reconciler will",
      );
      return undefined;
    });
    if (settled && (step.kind === "charge" ? settled.status === "paid" : settled.status === "cancelled"))
      return settled;
    throw this.forTheUser(step, error, call);
  }

  /**
   * What payments answered, as the step's outcome — only when it is what the step asked for. Anything
   * else (another amount, currency, reference or owner) is never believed: the step fails safe as
   * "nothing moved" (the order stays as it was, nothing is refunded), logged and counted.
   */
  private believed(
    step: StepRecord,
    orderOwner: bigint,
    answer: Answer,
    { note, call }: { note: string; call: CallScope | undefined },
  ): StepOutcome {
    const mismatch =
      answer.case === "payment" ? chargeMismatch(step, orderOwner, answer.value) : refundMismatch(step, answer.value);
    if (mismatch === undefined)
      return answer.case === "payment"
        ? { moved: true, paymentId: answer.value.id, note }
        : { moved: true, refundId: answer.value.id, note };
    moneyStepMismatches.labels({ step: step.kind }).inc();
    this.deps.logger.error(
      {
        ...callFields(call),
        orderId: step.orderId.toString(),
        tenantId: step.tenantId,
        step: step.kind,
        attempt: step.attempt,
        [answer.case === "payment" ? "paymentId" : "refundId"]: answer.value.id,
        differs: mismatch,
      },
      "payments answered with a payment or refund that is not the step's: not believed; the step failed and the order is as it was",
    );
    return {
      moved: false,
      note: `payments answered with a ${answer.case} that is not the step's (${mismatch}): not believed`,
    };
  }

  /**
   * A refusal as the user may see it: the key was orders' own, never the user's, so no refusal about
   * it is passed on as it stands (it would name a key the user never sent).
   */
  private forTheUser(step: StepRecord, error: ConnectError, call: CallScope): ConnectError {
    switch (errorInfoOf(error)?.reason) {
      case "IDEMPOTENCY_KEY_VOIDED":
        return fail(
          "IDEMPOTENCY_KEY_VOIDED",
          `the ${STEP_NAMES[step.kind]} was settled as abandoned before payments took it; nothing was moved: try again`,
        );
      case "IDEMPOTENCY_KEY_IN_FLIGHT":
        return fail(
          "STEP_IN_PROGRESS",
          `the order's ${STEP_NAMES[step.kind]} is still being settled with payments; read the order again in a few seconds`,
          { step: STEP_NAMES[step.kind] },
        );
      case "IDEMPOTENCY_KEY_REUSED":
      case "IDEMPOTENCY_KEY_INVALID":
        this.deps.logger.error(
          {
            ...callFields(call),
            orderId: step.orderId.toString(),
            step: step.kind,
            reason: errorInfoOf(error)?.reason,
          },
          "payments refused the key of an order's money step",
        );
        return fail("INTERNAL", `the ${STEP_NAMES[step.kind]} could not be made; nothing was moved`);
      default:
        return error;
    }
  }

  /** Records the outcome once; when someone else settled the step first, the order as it is now. */
  private async settle(step: StepRecord, outcome: StepOutcome, call: CallScope): Promise<OrderRecord> {
    const order = await this.deps.store.settleStep(step, outcome, call);
    return order ? order : this.current(step);
  }

  private async current(step: StepRecord): Promise<OrderRecord> {
    return (await this.deps.store.getOrder(step.tenantId, step.orderId))!;
  }
}

/** The answer of a step that payments gave was not the step's (see MoneySteps.believed). */
const notBelieved = (step: StepRecord) =>
  fail(
    "INTERNAL",
    `payments answered the order's ${STEP_NAMES[step.kind]} with something else; it was not believed and nothing changed on the order`,
  );
