// PaymentsStore on the PostgreSQL-family adapter. The idempotency key, the write it guards and the
// event reporting it to partners commit in one transaction (runIdempotent, appendEvent); refunds
// lock their payment row first.
import { DomainError } from "@switchyard/platform/domain-error.js";
import {
  appendEvent,
  jsonResultCodec,
  KeysetPageQuery,
  resolveIdempotencyKey,
  runIdempotent,
  type KeyedRequest,
  type SqlDatabase,
  type SqlExecutor,
} from "@switchyard/platform/store";
import { newId } from "@switchyard/platform/ids.js";
import type { Keyset } from "@switchyard/platform/paging.js";
import type { NewPayment } from "../domain/payments.js";
import { paymentSucceeded, refundSucceeded } from "../partner-events.js";
import type { PaymentRecord, PaymentsStore, RefundRecord } from "./port.js";

interface PaymentRow {
  id: string;
  tenant_id: string;
  amount: bigint;
  currency: string;
  source: string;
  amount_refunded: bigint;
  owner_user_id: bigint;
  reference: string;
  created_at: Date;
}

interface RefundRow {
  id: string;
  tenant_id: string;
  payment_id: string;
  amount: bigint;
  currency: string;
  reason: string;
  created_at: Date;
}

const PAYMENT_COLUMNS =
  "id, tenant_id, amount, currency, source, amount_refunded, owner_user_id, reference, created_at";
const CREATE_PAYMENT = "payments.create";
const CREATE_REFUND = "refunds.create";
const REFUND_COLUMNS = "id, tenant_id, payment_id, amount, currency, reason, created_at";
// Each statement's text is made once, here: a text made per call is a new string every time, which
// every lookup by text (its SQL verb for the metrics, its prepared statement) must hash again — the
// largest of payments' own costs on a read (issue 46).
const INSERT_PAYMENT = `INSERT INTO payments (id, tenant_id, amount, currency, source, owner_user_id, reference) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${PAYMENT_COLUMNS}`;
const PAYMENT_BY_ID = `SELECT ${PAYMENT_COLUMNS} FROM payments WHERE id = $1 AND tenant_id = $2`;
const LOCK_PAYMENT_BY_ID = `${PAYMENT_BY_ID} FOR UPDATE`;
const ADD_REFUNDED = "UPDATE payments SET amount_refunded = amount_refunded + $1 WHERE id = $2";
const INSERT_REFUND = `INSERT INTO refunds (id, tenant_id, payment_id, amount, currency, reason) VALUES ($1, $2, $3, $4, $5, $6) RETURNING ${REFUND_COLUMNS}`;
const REFUND_BY_ID = `SELECT ${REFUND_COLUMNS} FROM refunds WHERE id = $1 AND payment_id = $2 AND tenant_id = $3`;
// One statement for both: `$2 IS NULL` lets the admins' list and a member's share a plan shape.
const PAYMENTS_PAGE = new KeysetPageQuery({
  select: `SELECT ${PAYMENT_COLUMNS} FROM payments`,
  where: "tenant_id = $1 AND ($2::bigint IS NULL OR owner_user_id = $2)",
  order: "newest first",
});
const REFUNDS_PAGE = new KeysetPageQuery({
  select: `SELECT ${REFUND_COLUMNS} FROM refunds`,
  where: "payment_id = $1 AND tenant_id = $2",
  order: "newest first",
});

const toPayment = (r: PaymentRow): PaymentRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  amount: r.amount,
  currency: r.currency,
  source: r.source,
  amountRefunded: r.amount_refunded,
  ownerUserId: r.owner_user_id,
  reference: r.reference,
  createdAt: r.created_at,
});

const toRefund = (r: RefundRow): RefundRecord => ({
  id: r.id,
  tenantId: r.tenant_id,
  paymentId: r.payment_id,
  amount: r.amount,
  currency: r.currency,
  reason: r.reason,
  createdAt: r.created_at,
});

const paymentCodec = jsonResultCodec<PaymentRecord>();
const refundCodec = jsonResultCodec<RefundRecord>();

export class SqlPaymentsStore implements PaymentsStore {
  constructor(private readonly db: SqlDatabase) {}

  createPayment(tenantId: string, idempotency: KeyedRequest<PaymentRecord>, payment: NewPayment) {
    const scope = { tenantId, operation: CREATE_PAYMENT, ...idempotency };
    return runIdempotent(this.db, scope, paymentCodec, async (tx) => {
      const { rows } = await tx.query<PaymentRow>(INSERT_PAYMENT, [
        newId("pay"),
        tenantId,
        payment.amount,
        payment.currency,
        payment.source,
        payment.ownerUserId,
        payment.reference,
      ]);
      const created = toPayment(rows[0]!);
      await appendEvent(tx, paymentSucceeded(created));
      return created;
    });
  }

  // A plain promise chain, not an async function: every read of a payment runs it (see loadPayment).
  getPayment(tenantId: string, id: string): Promise<PaymentRecord | undefined> {
    return this.db.query<PaymentRow>(PAYMENT_BY_ID, [id, tenantId]).then(({ rows }) => rows[0] && toPayment(rows[0]));
  }

  async listPayments(
    tenantId: string,
    owner: bigint | undefined,
    after: Keyset | undefined,
    limit: number,
  ): Promise<PaymentRecord[]> {
    const rows = await PAYMENTS_PAGE.rows<PaymentRow>(this.db, [tenantId, owner ?? null], { after, limit });
    return rows.map(toPayment);
  }

  createRefund(
    tenantId: string,
    idempotency: KeyedRequest<RefundRecord>,
    refund: { paymentId: string; reason: string },
    decide: (payment: PaymentRecord) => bigint,
  ) {
    return runIdempotent(
      this.db,
      { tenantId, operation: CREATE_REFUND, ...idempotency },
      refundCodec,
      async (tx: SqlExecutor) => {
        const locked = await tx.query<PaymentRow>(LOCK_PAYMENT_BY_ID, [refund.paymentId, tenantId]);
        const payment = locked.rows[0] && toPayment(locked.rows[0]);
        if (!payment) throw new DomainError("NOT_FOUND", "payment not found");
        const amount = decide(payment);
        await tx.query(ADD_REFUNDED, [amount, payment.id]);
        const { rows } = await tx.query<RefundRow>(INSERT_REFUND, [
          newId("re"),
          tenantId,
          payment.id,
          amount,
          payment.currency,
          refund.reason,
        ]);
        const created = toRefund(rows[0]!);
        await appendEvent(tx, refundSucceeded(created));
        return created;
      },
    );
  }

  resolvePaymentKey(tenantId: string, key: Omit<KeyedRequest<PaymentRecord>, "requestHash">) {
    return resolveIdempotencyKey(this.db, { tenantId, operation: CREATE_PAYMENT, ...key }, paymentCodec);
  }

  resolveRefundKey(tenantId: string, key: Omit<KeyedRequest<RefundRecord>, "requestHash">) {
    return resolveIdempotencyKey(this.db, { tenantId, operation: CREATE_REFUND, ...key }, refundCodec);
  }

  async getRefund(tenantId: string, paymentId: string, refundId: string): Promise<RefundRecord | undefined> {
    const { rows } = await this.db.query<RefundRow>(REFUND_BY_ID, [refundId, paymentId, tenantId]);
    return rows[0] && toRefund(rows[0]);
  }

  async listRefunds(
    tenantId: string,
    paymentId: string,
    after: Keyset | undefined,
    limit: number,
  ): Promise<RefundRecord[]> {
    const rows = await REFUNDS_PAGE.rows<RefundRow>(this.db, [paymentId, tenantId], { after, limit });
    return rows.map(toRefund);
  }
}
