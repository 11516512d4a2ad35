// gen.mjs records webhook signature vectors with providers' official Node.js
// SDKs, for providers/all/sdkvectors_test.go. Run it with `make sdk-vectors`
// (npm ci, then node gen.mjs); it writes vectors.json next to itself.
//
// For each provider it builds one genuine delivery and one tampered copy (one
// byte of the signed content changed) and asks the SDK about both. Where the
// SDK can sign (a signing helper, a test helper), the signature is the SDK's
// own ("sdk-signs"); where it can only verify, the signature is computed here
// with node:crypto following the provider's scheme and the SDK's verdict is
// recorded ("sdk-verifies"). The script exits non-zero, writing nothing, when
// an SDK rejects a genuine vector or accepts a tampered one.
//
// SDKs that check the signed time against the clock are given the current
// time: every vector carries `time`, the Unix second it was signed at, and
// the Go test runs hookline at that time.

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));

// The signing time: a whole second, so that millisecond timestamps are
// T*1000 and hookline's Signer, run at T, writes the same value.
const T = Math.floor(Date.now() / 1000);
const TMS = T * 1000;
const ISO = new Date(TMS).toISOString(); // 2026-12-01T10:00:00.000Z

function version(pkg) {
  return JSON.parse(fs.readFileSync(path.join(here, 'node_modules', pkg, 'package.json'), 'utf8')).version;
}

const hmac = (alg, key, msg, enc) => crypto.createHmac(alg, key).update(msg).digest(enc);

// tamperLastDigit changes the last decimal digit of s (d -> d+1 mod 10): one
// byte, and a JSON body stays valid JSON (the last digit of a number is never
// a leading zero).
function tamperLastDigit(s) {
  for (let i = s.length - 1; i >= 0; i--) {
    const c = s.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      return s.slice(0, i) + String.fromCharCode(48 + ((c - 48 + 1) % 10)) + s.slice(i + 1);
    }
  }
  throw new Error('no digit to tamper with');
}

function oneByteApart(a, b) {
  if (a.length !== b.length) return false;
  let n = 0;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) n++;
  return n === 1;
}

const vectors = [];
const failures = [];

// verdict runs an SDK check: it accepts unless it throws, rejects a promise
// or returns exactly false.
async function verdict(fn) {
  try {
    const r = await fn();
    return r === false ? [false, 'returned false'] : [true, ''];
  } catch (e) {
    return [false, String((e && e.message) || e)];
  }
}

// add records a provider's genuine vector and its tampered copy.
//
//   provider           hookline's adapter name
//   variant            a name for the vector when a provider has several
//   pkg, fn            the SDK package and the SDK call(s) used
//   direction          "sdk-signs" or "sdk-verifies"
//   secret             the secret as configured in hookline
//   url, headers, body the delivery
//   signatureHeaders   the headers hookline's Signer must reproduce
//   signSkip           why hookline's Signer is not compared (optional)
//   otherSecret        a secret under which the genuine delivery must not
//                      verify (optional): for schemes whose secret is a public
//                      key, which changed in its last character is no key or,
//                      in base64 padding bits, the same key. The SDK is asked
//                      too, so verify(v) must read the key from v.secret.
//   note               anything a reviewer should know (optional)
//   verify(v)          asks the SDK about delivery v
//   tamper(v)          returns v with one byte of the signed content changed
//                      (default: the body's last digit)
//   sdkResponse        what the SDK answers a handshake (optional)
async function add(p) {
  const genuine = {
    provider: p.provider,
    variant: p.variant || 'genuine',
    sdk: `${p.pkg}@${version(p.pkg)}`,
    function: p.fn,
    direction: p.direction,
    secret: p.secret,
    method: 'POST',
    url: p.url || `https://hooks.example.com/webhooks/${p.provider}`,
    headers: p.headers,
    body: p.body,
    time: T,
    sdk_accepts: true,
    signature_headers: p.signatureHeaders || [],
  };
  if (p.signSkip) genuine.sign_skip = p.signSkip;
  if (p.otherSecret) genuine.other_secret = p.otherSecret;
  if (p.note) genuine.note = p.note;
  if (p.sdkResponse) genuine.sdk_response = await p.sdkResponse(genuine);

  const [ok, why] = await verdict(() => p.verify(genuine));
  if (!ok) {
    failures.push(`${p.provider}/${genuine.variant}: ${genuine.sdk} ${p.fn} REJECTS the genuine vector: ${why}`);
    return;
  }
  if (p.otherSecret) {
    const [okOther] = await verdict(() => p.verify({ ...genuine, secret: p.otherSecret }));
    if (okOther) {
      failures.push(`${p.provider}/${genuine.variant}: ${genuine.sdk} ${p.fn} ACCEPTS the genuine vector under other_secret`);
      return;
    }
  }
  vectors.push(genuine);

  const bad = structuredClone(genuine);
  bad.variant = `${genuine.variant}-tampered`;
  bad.sdk_accepts = false;
  delete bad.signature_headers;
  delete bad.sign_skip;
  delete bad.other_secret;
  delete bad.sdk_response;
  delete bad.note;
  if (p.tamper) {
    p.tamper(bad);
  } else {
    bad.body = tamperLastDigit(genuine.body);
  }
  const changed = bad.body !== genuine.body ? oneByteApart(bad.body, genuine.body) : oneByteApart(bad.url, genuine.url);
  if (!changed) throw new Error(`${p.provider}: the tampered vector must differ by exactly one byte of the body (or URL)`);
  const [ok2] = await verdict(() => p.verify(bad));
  if (ok2) {
    failures.push(`${p.provider}/${bad.variant}: ${genuine.sdk} ${p.fn} ACCEPTS the tampered vector`);
    return;
  }
  vectors.push(bad);
}

const json = (ct = 'application/json') => ({ 'Content-Type': ct });

// --- Braintree: the SDK signs (webhookTesting.sampleNotification) and
// verifies (webhookNotification.parse).
{
  const braintree = require('braintree');
  const gw = new braintree.BraintreeGateway({
    environment: braintree.Environment.Sandbox,
    merchantId: 'hookline_merchant',
    publicKey: 'hookline_public_key',
    privateKey: 'hookline_private_key',
  });
  const n = gw.webhookTesting.sampleNotification(braintree.WebhookNotification.Kind.SubscriptionChargedSuccessfully, 'sub_sdkvector1');
  const form = (payload, signature) => new URLSearchParams({ bt_payload: payload, bt_signature: signature }).toString();
  const parse = (v) => {
    const f = new URLSearchParams(v.body);
    return gw.webhookNotification.parse(f.get('bt_signature'), f.get('bt_payload'));
  };
  await add({
    provider: 'braintree',
    pkg: 'braintree',
    fn: 'webhookTesting.sampleNotification + webhookNotification.parse',
    direction: 'sdk-signs',
    secret: 'hookline_public_key:hookline_private_key',
    headers: json('application/x-www-form-urlencoded'),
    body: form(n.bt_payload, n.bt_signature),
    signatureHeaders: [],
    note: 'the signature is the bt_signature form field; Sign must rewrite the body to the same form',
    verify: parse,
    tamper: (v) => {
      // One base64 character of bt_payload: still valid characters, so the
      // SDK rejects on the signature, not on the alphabet.
      const f = new URLSearchParams(v.body);
      const p = f.get('bt_payload');
      const i = 40;
      const c = p[i] === 'A' ? 'B' : 'A';
      v.body = form(p.slice(0, i) + c + p.slice(i + 1), f.get('bt_signature'));
    },
  });
}

// --- HubSpot v3: the SDK signs (Signature.getSignature) and verifies
// (Signature.isValid, which also checks the timestamp against the clock).
{
  const { Signature } = require('@hubspot/api-client');
  const secret = 'hookline-hubspot-client-secret';
  const url = 'https://hooks.example.com/webhooks/hubspot';
  const body = `[{"eventId":1787215911,"subscriptionId":4062142,"portalId":62515,"appId":1160452,"occurredAt":${TMS - 1000},"subscriptionType":"contact.propertyChange","attemptNumber":0,"objectId":1246965,"propertyName":"lifecyclestage","propertyValue":"customer","changeSource":"CRM"}]`;
  const ts = String(TMS);
  const sig = Signature.getSignature('POST', 'v3', { clientSecret: secret, requestBody: body, url, timestamp: ts });
  await add({
    provider: 'hubspot',
    pkg: '@hubspot/api-client',
    fn: "Signature.getSignature('POST','v3') + Signature.isValid({signatureVersion:'v3'})",
    direction: 'sdk-signs',
    secret,
    url,
    headers: { ...json(), 'X-HubSpot-Signature-v3': sig, 'X-HubSpot-Request-Timestamp': ts },
    body,
    signatureHeaders: ['X-HubSpot-Signature-v3', 'X-HubSpot-Request-Timestamp'],
    verify: (v) =>
      Signature.isValid({
        signatureVersion: 'v3',
        method: v.method,
        signature: v.headers['X-HubSpot-Signature-v3'],
        clientSecret: secret,
        requestBody: v.body,
        url: v.url,
        timestamp: v.headers['X-HubSpot-Request-Timestamp'],
      }),
  });
}

// --- WorkOS: the SDK signs (webhooks.computeSignature) and verifies
// (webhooks.constructEvent). Both take the PARSED payload and sign
// JSON.stringify of it, so the body is written as JSON.stringify writes it.
{
  const { WorkOS } = await import('@workos-inc/node');
  const workos = new WorkOS('sk_test_hookline');
  const secret = 'hookline-workos-webhook-secret';
  const body = JSON.stringify({
    id: 'event_01JSDKVECTOR00000000000001',
    event: 'user.created',
    data: { object: 'user', id: 'user_01E4ZCR3C56J083X43JQXF3JK5', email: 'jon@example.com' },
    created_at: ISO,
  });
  const ts = String(TMS);
  const sig = await workos.webhooks.computeSignature(ts, JSON.parse(body), secret);
  await add({
    provider: 'workos',
    pkg: '@workos-inc/node',
    fn: 'webhooks.computeSignature + webhooks.constructEvent',
    direction: 'sdk-signs',
    secret,
    headers: { ...json(), 'WorkOS-Signature': `t=${ts}, v1=${sig}` },
    body,
    signatureHeaders: ['WorkOS-Signature'],
    signSkip: 'WorkOS writes "t=<ms>, v1=<hex>" (comma and space); hookline\'s Signer writes "t=<ms>,v1=<hex>"',
    note: 'the SDK signs JSON.stringify(JSON.parse(body)): the body is compact JSON, so that is the body itself',
    verify: (v) => workos.webhooks.constructEvent({ payload: JSON.parse(v.body), sigHeader: v.headers['WorkOS-Signature'], secret }),
  });
}

// --- Cashfree: the SDK verifies (Cashfree.PGVerifyWebhookSignature).
{
  const { Cashfree, CFEnvironment } = require('cashfree-pg');
  const secret = 'cfsk_ma_test_hookline_client_secret';
  // The last argument turns the SDK's error analytics (Sentry) off.
  const cf = new Cashfree(CFEnvironment.SANDBOX, 'hookline_client_id', secret, undefined, undefined, undefined, false);
  const body = '{"data":{"order":{"order_id":"order_OFR_2","order_amount":20.00,"order_currency":"INR"},"payment":{"cf_payment_id":"5114917039291","payment_status":"SUCCESS","payment_amount":20.00,"payment_currency":"INR","payment_time":"2026-11-30T17:30:00+05:30"}},"event_time":"2026-11-30T17:30:01+05:30","type":"PAYMENT_SUCCESS_WEBHOOK"}';
  const ts = String(TMS);
  await add({
    provider: 'cashfree',
    pkg: 'cashfree-pg',
    fn: 'Cashfree.PGVerifyWebhookSignature',
    direction: 'sdk-verifies',
    secret,
    headers: { ...json(), 'x-webhook-timestamp': ts, 'x-webhook-signature': hmac('sha256', secret, ts + body, 'base64') },
    body,
    signatureHeaders: ['x-webhook-signature', 'x-webhook-timestamp'],
    verify: (v) => cf.PGVerifyWebhookSignature(v.headers['x-webhook-signature'], v.body, v.headers['x-webhook-timestamp']),
  });
}

// --- EasyPost: the SDK verifies (Utils.validateWebhook). It rewrites an
// integer "weight" to "N.0" before the MAC; EasyPost sends weights as floats,
// as here, which it leaves alone.
{
  const EasyPostClient = require('@easypost/api');
  const client = new EasyPostClient('EZTK_hookline');
  const secret = 'hookline-easypost-webhook-secret';
  const body = '{"id":"evt_sdkvector1","object":"Event","mode":"test","description":"tracker.updated","created_at":"2026-11-30T12:00:00Z","result":{"id":"trk_c8e0edb5bb284caa934a0d3db23a148z","object":"Tracker","tracking_code":"9400100000000000000000","status":"in_transit","weight":16.0}}';
  await add({
    provider: 'easypost',
    pkg: '@easypost/api',
    fn: 'client.Utils.validateWebhook',
    direction: 'sdk-verifies',
    secret,
    headers: { ...json(), 'X-Hmac-Signature': 'hmac-sha256-hex=' + hmac('sha256', secret, body, 'hex') },
    body,
    signatureHeaders: ['X-Hmac-Signature'],
    verify: (v) => client.Utils.validateWebhook(Buffer.from(v.body), v.headers, secret),
  });
  // The SDK NFKD-normalises the secret before keying the MAC: a secret with a
  // compatibility character (U+FB01, the "fi" ligature) keys it as "fi".
  const nfkdSecret = 'hookline-\ufb01-easypost-secret';
  await add({
    provider: 'easypost',
    variant: 'nfkd-secret',
    pkg: '@easypost/api',
    fn: 'client.Utils.validateWebhook',
    direction: 'sdk-verifies',
    secret: nfkdSecret,
    headers: { ...json(), 'X-Hmac-Signature': 'hmac-sha256-hex=' + hmac('sha256', nfkdSecret.normalize('NFKD'), body, 'hex') },
    body,
    signatureHeaders: ['X-Hmac-Signature'],
    note: 'the secret contains U+FB01; EasyPost keys the MAC with its NFKD form',
    verify: (v) => client.Utils.validateWebhook(Buffer.from(v.body), v.headers, nfkdSecret),
  });
}

// --- Onfido: the SDK verifies (WebhookEventVerifier.readPayload).
{
  const { WebhookEventVerifier } = require('@onfido/api');
  const secret = 'hookline-onfido-webhook-token';
  const verifier = new WebhookEventVerifier(secret);
  const body = '{"payload":{"resource_type":"check","action":"check.completed","object":{"id":"a1b2c3d4-0000-4e5f-8a9b-0c1d2e3f4a5b","status":"complete","completed_at_iso8601":"2026-11-30T12:00:00Z","href":"https://api.onfido.com/v3.6/checks/a1b2c3d4-0000-4e5f-8a9b-0c1d2e3f4a5b"}}}';
  await add({
    provider: 'onfido',
    pkg: '@onfido/api',
    fn: 'WebhookEventVerifier.readPayload',
    direction: 'sdk-verifies',
    secret,
    headers: { ...json(), 'X-SHA2-Signature': hmac('sha256', secret, body, 'hex') },
    body,
    signatureHeaders: ['X-SHA2-Signature'],
    verify: (v) => verifier.readPayload(Buffer.from(v.body), v.headers['X-SHA2-Signature']),
  });
}

// --- Orb: the SDK signs (webhooks.signPayload) and verifies
// (webhooks.unwrap, which checks the timestamp against the clock). Orb's
// X-Orb-Timestamp has no time zone (UTC): "2024-03-27T15:42:29.551".
{
  const { default: Orb } = await import('orb-billing');
  const secret = 'hookline-orb-webhook-secret';
  const orb = new Orb({ apiKey: 'hookline', webhookSecret: secret });
  const body = '{"id":"o4mmewpfNNTnjfZc","created_at":"2026-11-30T12:00:00+00:00","type":"invoice.payment_succeeded","properties":{},"invoice":{"id":"XqkQjYzLkJQ8wKcH","amount_due":"20.00","currency":"USD","status":"paid"}}';
  const unwrap = (v) => orb.webhooks.unwrap(v.body, v.headers, secret);
  for (const [variant, ts, skip] of [
    ['orb-format', ISO.slice(0, -1), 'X-Orb-Timestamp carries milliseconds (".000"), as Orb writes it; hookline\'s Signer writes whole seconds'],
    ['whole-seconds', ISO.slice(0, 19), ''],
  ]) {
    await add({
      provider: 'orb',
      variant,
      pkg: 'orb-billing',
      fn: 'webhooks.signPayload + webhooks.unwrap',
      direction: 'sdk-signs',
      secret,
      headers: { ...json(), 'X-Orb-Timestamp': ts, 'X-Orb-Signature': orb.webhooks.signPayload(body, { timestamp: ts, secret }) },
      body,
      signatureHeaders: ['X-Orb-Signature', 'X-Orb-Timestamp'],
      signSkip: skip,
      note: 'the SDK also accepts a timestamp with a zone (Z or +hh:mm); Orb sends none, and hookline reads the zone-less form only',
      verify: unwrap,
    });
  }
}

// --- Mux: the SDK signs (webhooks.computeSignature) and verifies
// (webhooks.unwrap, which checks the timestamp against the clock).
{
  const { default: Mux } = await import('@mux/mux-node');
  const secret = 'hookline-mux-webhook-secret';
  const mux = new Mux({ tokenId: 'hookline', tokenSecret: 'hookline', webhookSecret: secret });
  const body = '{"type":"video.asset.ready","object":{"type":"asset","id":"0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002"},"id":"3a56ac3d-33da-4366-855b-f592d898409d","environment":{"name":"Production","id":"uc8kep"},"data":{"status":"ready","id":"0201p02fGKPE7MrbC269XRD7LpcHhrmbu0002"},"created_at":"2026-11-30T12:00:00.000000Z"}';
  const sig = await mux.webhooks.computeSignature(`${T}.${body}`, secret);
  await add({
    provider: 'mux',
    pkg: '@mux/mux-node',
    fn: 'webhooks.computeSignature + webhooks.unwrap',
    direction: 'sdk-signs',
    secret,
    headers: { ...json(), 'Mux-Signature': `t=${T},v1=${sig}` },
    body,
    signatureHeaders: ['Mux-Signature'],
    verify: (v) => mux.webhooks.unwrap(v.body, v.headers, secret),
  });
}

// --- Linear: the SDK verifies (LinearWebhookClient.verify, which also
// requires the body's webhookTimestamp within a minute of the clock).
{
  const { LinearWebhookClient } = await import('@linear/sdk/webhooks');
  const secret = 'lin_wh_hookline_secret';
  const client = new LinearWebhookClient(secret);
  const body = `{"action":"create","type":"Issue","createdAt":"2026-11-30T12:00:00.000Z","data":{"id":"2174add1-f7c8-44e3-bbf3-2d60b5ea8bc9","title":"Webhooks","teamId":"72b2a2dc-6f4f-4423-9d34-24b5bd10634a"},"url":"https://linear.app/hookline/issue/HOOK-1","organizationId":"1","webhookTimestamp":${TMS},"webhookId":"000042e3-d123-4980-b49f-8e140eef9329"}`;
  await add({
    provider: 'linear',
    pkg: '@linear/sdk',
    fn: 'LinearWebhookClient.verify (@linear/sdk/webhooks)',
    direction: 'sdk-verifies',
    secret,
    headers: {
      ...json(),
      'Linear-Signature': hmac('sha256', secret, body, 'hex'),
      'Linear-Delivery': '234d1a4e-b617-4388-90fe-adc3633d6b72',
      'Linear-Event': 'Issue',
    },
    body,
    signatureHeaders: ['Linear-Signature'],
    note: 'the SDK also requires the body\'s webhookTimestamp within 60 s of its clock; hookline checks no time for Linear',
    verify: (v) => client.verify(Buffer.from(v.body), v.headers['Linear-Signature']),
  });
}

// --- Shopify: the SDK signs (runtime createSHA256HMAC, the helper its own
// validation uses) and verifies (shopify.webhooks.validate), for both the
// classic X-Shopify-* headers and the Events Shopify-* headers.
{
  await import('@shopify/shopify-api/adapters/web-api');
  const { shopifyApi, LogSeverity } = await import('@shopify/shopify-api');
  const { createSHA256HMAC, HashFormat } = await import('@shopify/shopify-api/runtime');
  const secret = 'hookline-shopify-api-secret-key';
  const shopify = shopifyApi({
    apiKey: 'hookline-api-key',
    apiSecretKey: secret,
    scopes: ['read_orders'],
    hostName: 'hooks.example.com',
    apiVersion: '2025-07',
    isEmbeddedApp: false,
    logger: { level: LogSeverity.Error, log: () => {} },
  });
  const body = '{"id":820982911946154508,"admin_graphql_api_id":"gid://shopify/Order/820982911946154508","email":"jon@example.com","created_at":"2026-11-30T07:00:00-05:00","currency":"USD","total_price":"10.00","financial_status":"paid","line_items":[{"id":866550311766439020,"title":"Hookline","quantity":1,"price":"10.00"}]}';
  const sig = await createSHA256HMAC(secret, body, HashFormat.Base64);
  const validate = async (v) => {
    const r = await shopify.webhooks.validate({
      rawBody: v.body,
      rawRequest: new Request(v.url, { method: v.method, headers: v.headers, body: v.body }),
    });
    if (!r.valid) throw new Error(`invalid: ${r.reason}`);
  };
  await add({
    provider: 'shopify',
    variant: 'webhooks',
    pkg: '@shopify/shopify-api',
    fn: 'runtime createSHA256HMAC + webhooks.validate',
    direction: 'sdk-signs',
    secret,
    headers: {
      ...json(),
      'X-Shopify-Hmac-Sha256': sig,
      'X-Shopify-Topic': 'orders/create',
      'X-Shopify-Shop-Domain': 'hookline.myshopify.com',
      'X-Shopify-API-Version': '2025-07',
      'X-Shopify-Webhook-Id': 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043',
      'X-Shopify-Event-Id': '98880550-7158-44d4-b7cd-2c97c8a091b5',
      'X-Shopify-Triggered-At': '2026-11-30T12:00:00.000000000Z',
    },
    body,
    signatureHeaders: ['X-Shopify-Hmac-Sha256'],
    verify: validate,
  });
  await add({
    provider: 'shopify',
    variant: 'events',
    pkg: '@shopify/shopify-api',
    fn: 'runtime createSHA256HMAC + webhooks.validate',
    direction: 'sdk-signs',
    secret,
    headers: {
      ...json(),
      'Shopify-Hmac-Sha256': sig,
      'Shopify-Topic': 'orders/create',
      'Shopify-Shop-Domain': 'hookline.myshopify.com',
      'Shopify-API-Version': '2025-07',
      'Shopify-Webhook-Id': 'b54557e4-bdd9-4b37-8a5f-bf7d70bcd043',
      'Shopify-Event-Id': '98880550-7158-44d4-b7cd-2c97c8a091b5',
      'X-Shopify-Event-Id': '98880550-7158-44d4-b7cd-2c97c8a091b5',
      'Shopify-Triggered-At': '2026-11-30T12:00:00.000000000Z',
    },
    body,
    signatureHeaders: ['Shopify-Hmac-Sha256'],
    signSkip: 'hookline\'s Signer writes the classic X-Shopify-Hmac-Sha256 header, not the Events Shopify-Hmac-Sha256',
    note: 'X-Shopify-Event-Id is set too: hookline\'s default event id reads it',
    verify: validate,
  });
}

// --- Coinbase Commerce: the SDK signs (Webhook.computeSignature) and
// verifies (Webhook.verifyEventBody).
{
  const { Webhook } = require('coinbase-commerce-node');
  const secret = 'hookline-coinbase-shared-secret';
  const body = '{"id":1,"scheduled_for":"2026-11-30T12:00:00Z","attempt_number":1,"event":{"id":"24934862-d980-46cb-9402-43c81b0cdba6","resource":"event","type":"charge:confirmed","api_version":"2018-03-22","created_at":"2026-11-30T11:59:00Z","data":{"code":"66BEOV2A","name":"The Sovereign Individual","pricing_type":"no_price"}}}';
  await add({
    provider: 'coinbase',
    pkg: 'coinbase-commerce-node',
    fn: 'Webhook.computeSignature + Webhook.verifyEventBody',
    direction: 'sdk-signs',
    secret,
    headers: { ...json(), 'X-CC-Webhook-Signature': Webhook.computeSignature(body, secret) },
    body,
    signatureHeaders: ['X-CC-Webhook-Signature'],
    verify: (v) => Webhook.verifyEventBody(v.body, v.headers['X-CC-Webhook-Signature'], secret),
  });
}

// --- Webflow: the SDK verifies (webhooks.verifySignature; it checks no time).
{
  const { WebflowClient } = require('webflow-api');
  const wf = new WebflowClient({ accessToken: 'hookline' });
  const secret = 'hookline-webflow-webhook-secret';
  const body = '{"triggerType":"form_submission","payload":{"name":"Contact","siteId":"65427cf400e02b306eaa049c","data":{"Email":"jon@example.com"},"submittedAt":"2026-11-30T12:00:00.000Z","id":"6321ca84df3949bfc6752327","formId":"65429eadebe8a9f3a30f62d0"}}';
  const ts = String(TMS);
  await add({
    provider: 'webflow',
    pkg: 'webflow-api',
    fn: 'webhooks.verifySignature',
    direction: 'sdk-verifies',
    secret,
    headers: { ...json(), 'x-webflow-timestamp': ts, 'x-webflow-signature': hmac('sha256', secret, `${ts}:${body}`, 'hex') },
    body,
    signatureHeaders: ['x-webflow-signature', 'x-webflow-timestamp'],
    verify: (v) => wf.webhooks.verifySignature({ headers: v.headers, body: v.body, secret }),
  });
}

// --- Worldline: the Connect SDK and the Direct (online payments) SDK verify
// (webhooks helper unmarshal, with the key looked up by X-GCS-KeyId).
{
  const secret = 'hookline-worldline-webhook-secret';
  const store = { getSecretKey: (keyId) => (keyId === 'hookline-key-id' ? Promise.resolve(secret) : Promise.reject(new Error('unknown key id'))) };
  const body = '{"apiVersion":"v1","created":"2026-11-30T12:00:00.000+0100","id":"8ee793f6-4553-4749-85dc-f2ef095c5ab0","merchantId":"1","type":"payment.captured","payment":{"id":"3069566340_0","paymentOutput":{"amountOfMoney":{"amount":2000,"currencyCode":"EUR"}},"status":"CAPTURED"}}';
  const headers = { ...json(), 'X-GCS-Signature': hmac('sha256', secret, body, 'base64'), 'X-GCS-KeyId': 'hookline-key-id' };
  const connect = require('connect-sdk-nodejs');
  const connectHelper = connect.webhooks.v1.init(store);
  await add({
    provider: 'worldline',
    variant: 'connect',
    pkg: 'connect-sdk-nodejs',
    fn: 'webhooks.v1.init(store).unmarshal',
    direction: 'sdk-verifies',
    secret,
    headers,
    body,
    signatureHeaders: ['X-GCS-Signature'],
    verify: (v) => connectHelper.unmarshal(Buffer.from(v.body), v.headers),
  });
  const direct = require('onlinepayments-sdk-nodejs');
  const directHelper = direct.webhooks.init(store);
  await add({
    provider: 'worldline',
    variant: 'direct',
    pkg: 'onlinepayments-sdk-nodejs',
    fn: 'webhooks.init(store).unmarshal',
    direction: 'sdk-verifies',
    secret,
    headers,
    body,
    signatureHeaders: ['X-GCS-Signature'],
    verify: (v) => directHelper.unmarshal(Buffer.from(v.body), v.headers),
  });
}

// --- Notion: the SDK signs (signWebhookPayload) and verifies
// (verifyWebhookSignature).
{
  const { signWebhookPayload, verifyWebhookSignature } = require('@notionhq/client');
  const secret = 'secret_hookline_notion_verification_token';
  const body = '{"id":"367cba44-b6f3-4c92-81e7-6a2e9659efd4","timestamp":"2026-11-30T12:00:00.000Z","workspace_id":"13950b26-c203-4f3b-b97d-93ec06319565","subscription_id":"29d75c0d-5546-4414-8459-7b7a92f1fc4b","integration_id":"0ef2e755-4912-8096-91c1-00376a88a5ca","type":"page.content_updated","entity":{"id":"153104cd-477e-809d-8dc4-ff2d96ae3090","type":"page"},"data":{}}';
  await add({
    provider: 'notion',
    pkg: '@notionhq/client',
    fn: 'signWebhookPayload + verifyWebhookSignature',
    direction: 'sdk-signs',
    secret,
    headers: { ...json(), 'X-Notion-Signature': await signWebhookPayload({ body, verificationToken: secret }) },
    body,
    signatureHeaders: ['X-Notion-Signature'],
    verify: (v) => verifyWebhookSignature({ body: v.body, signature: v.headers['X-Notion-Signature'], verificationToken: secret }),
  });
}

// --- Zoom: the SDK (Rivet) verifies through its AWS Lambda receiver, which
// answers 200 or 400, and answers the URL validation handshake. Rivet signs
// JSON.stringify of the parsed body: the bodies are compact JSON.
{
  const { AwsLambdaReceiver } = require('@zoom/rivet/users');
  const secret = 'hookline-zoom-secret-token';
  const receiver = new AwsLambdaReceiver({ webhooksSecretToken: secret });
  receiver.init({ eventEmitter: { emit: async () => {} } });
  const handler = receiver.start();
  const call = async (v) => {
    const debug = console.debug;
    console.debug = () => {}; // the receiver logs every event
    try {
      return await handler({ body: v.body, headers: v.headers, isBase64Encoded: false }, {});
    } finally {
      console.debug = debug;
    }
  };
  const verify = async (v) => {
    const r = await call(v);
    if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}: ${r.body}`);
  };
  const sign = (body) => ({ ...json(), 'x-zm-request-timestamp': String(T), 'x-zm-signature': 'v0=' + hmac('sha256', secret, `v0:${T}:${body}`, 'hex') });
  const event = '{"event":"meeting.started","event_ts":1764504000000,"payload":{"account_id":"D8cJuqWVQ623CI4Q8yQK0Q","object":{"id":"85746065432","uuid":"4444AAAiAAAAAiAiAiiAii==","host_id":"x1yCzABCDEfg23HiJKl4mN","topic":"My Meeting","type":2,"start_time":"2026-11-30T12:00:00Z","duration":60,"timezone":"America/Los_Angeles"}}}';
  const validation = `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":${TMS},"event":"endpoint.url_validation"}`;
  for (const b of [event, validation]) {
    if (JSON.stringify(JSON.parse(b)) !== b) throw new Error('zoom: the body must be compact JSON');
  }
  await add({
    provider: 'zoom',
    variant: 'event',
    pkg: '@zoom/rivet',
    fn: 'AwsLambdaReceiver (@zoom/rivet/users)',
    direction: 'sdk-verifies',
    secret,
    headers: sign(event),
    body: event,
    signatureHeaders: ['x-zm-signature', 'x-zm-request-timestamp'],
    note: 'Rivet checks no time',
    verify,
  });
  await add({
    provider: 'zoom',
    variant: 'url-validation',
    pkg: '@zoom/rivet',
    fn: 'AwsLambdaReceiver (@zoom/rivet/users)',
    direction: 'sdk-verifies',
    secret,
    headers: sign(validation),
    body: validation,
    signatureHeaders: ['x-zm-signature', 'x-zm-request-timestamp'],
    note: 'sdk_response is the SDK\'s answer to the handshake; hookline\'s Respond must give the same JSON',
    sdkResponse: async (v) => JSON.parse((await call(v)).body),
    verify,
  });
}

// --- Mercado Pago: the SDK verifies (WebhookSignatureValidator.validate).
// The body is not signed: the manifest is data.id (from the notification
// URL's query), x-request-id and ts. The tampered vector changes data.id in
// the URL; a second accepted vector changes only the body.
{
  const { WebhookSignatureValidator } = require('mercadopago');
  const secret = 'hookline-mercadopago-webhook-secret';
  const requestId = 'bb56a2f1-6aae-46ac-982e-9dcd3581d08e';
  const dataId = '123456789';
  const manifest = `id:${dataId};request-id:${requestId};ts:${T};`;
  const body = `{"action":"payment.updated","api_version":"v1","data":{"id":"${dataId}"},"date_created":"2026-11-30T12:00:00Z","id":112233445566,"live_mode":false,"type":"payment","user_id":724484980}`;
  const validate = (v) =>
    WebhookSignatureValidator.validate({
      xSignature: v.headers['x-signature'],
      xRequestId: v.headers['x-request-id'],
      dataId: new URL(v.url).searchParams.get('data.id'),
      secret,
      toleranceSeconds: 300,
    });
  const common = {
    provider: 'mercadopago',
    pkg: 'mercadopago',
    fn: 'WebhookSignatureValidator.validate',
    direction: 'sdk-verifies',
    secret,
    url: `https://hooks.example.com/webhooks/mercadopago?data.id=${dataId}&type=payment`,
    headers: { ...json(), 'x-signature': `ts=${T},v1=${hmac('sha256', secret, manifest, 'hex')}`, 'x-request-id': requestId },
    signatureHeaders: ['x-signature'],
    signSkip: 'hookline\'s Signer writes ts in milliseconds; Mercado Pago and its SDK (whose tolerance check reads ts as seconds) use seconds',
    verify: validate,
    tamper: (v) => {
      v.url = v.url.replace(`data.id=${dataId}`, `data.id=${tamperLastDigit(dataId)}`);
    },
  };
  await add({ ...common, body });
  await add({
    ...common,
    variant: 'body-not-signed',
    body: body.replace('"id":112233445566', '"id":112233445567'),
    note: 'the body differs from the genuine vector\'s by one byte and is still accepted: Mercado Pago signs no body',
  });
}

// --- WhatsApp Cloud API: the SDK (WhatsApp-Nodejs-SDK, published by Meta as
// "whatsapp") signs with generateXHub256Sig, the helper its webhook listener
// checks X-Hub-Signature-256 with: it strips "sha256=" from the header and
// compares the rest with generateXHub256Sig(body, app secret). That listener
// itself cannot be run: in this version it fails on every signed POST (it
// concatenates the body chunks into a string, then calls Buffer.concat on
// it), so its comparison is made here as it makes it. The helper is not in
// the package's exports map and is loaded by its file path.
{
  const { generateXHub256Sig } = require(path.join(here, 'node_modules', 'whatsapp', 'build', 'utils.js'));
  const secret = 'hookline-whatsapp-app-secret';
  const body = '{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550783881","phone_number_id":"106540352242922"},"messages":[{"from":"16505551234","id":"wamid.HBgLMTY1MDU1NTEyMzQVAgASGBQzQTdGRjQzOTA3RkY1OTRGQUQxNwA=","timestamp":"1764504000","text":{"body":"Hello"},"type":"text"}]},"field":"messages"}]}]}';
  await add({
    provider: 'whatsapp',
    pkg: 'whatsapp',
    fn: 'generateXHub256Sig (build/utils.js), compared as WebhooksAPI.start compares it',
    direction: 'sdk-signs',
    secret,
    headers: { ...json(), 'X-Hub-Signature-256': 'sha256=' + generateXHub256Sig(body, secret) },
    body,
    signatureHeaders: ['X-Hub-Signature-256'],
    note: 'the SDK\'s own listener (WebhooksAPI.start) throws on every signed POST in this version, so its check is replayed with the helper it uses',
    verify: (v) => generateXHub256Sig(v.body, secret) === v.headers['X-Hub-Signature-256'].replace('sha256=', ''),
  });
}

// --- Box: the SDK verifies (WebhooksManager.validateMessage, which also
// requires box-signature-version 1, box-signature-algorithm HmacSHA256 and
// a delivery timestamp no older than 10 minutes and not in the future).
// Box signs the body followed by the timestamp, once with the primary key
// (box-signature-primary) and once with the secondary one
// (box-signature-secondary); a vector is recorded for each key.
{
  const { WebhooksManager } = require('box-typescript-sdk-gen/managers/webhooks.generated');
  const primary = 'hookline-box-primary-signature-key';
  const secondary = 'hookline-box-secondary-signature-key';
  const ts = new Date(TMS).toISOString().replace('.000Z', 'Z');
  const body = '{"type":"webhook_event","id":"c8ad1b5e-6a5c-4b7e-9b1a-0c1d2e3f4a5b","created_at":"2026-11-30T04:00:00-08:00","trigger":"FILE.UPLOADED","webhook":{"id":"4165","type":"webhook"},"created_by":{"type":"user","id":"2030392","name":"Jon","login":"jon@example.com"},"source":{"id":"1290810935","type":"file","name":"report.pdf","parent":{"type":"folder","id":"134597453"}}}';
  const headers = {
    ...json(),
    'box-delivery-id': '673a081b-bb4b-4d45-b4f1-4131a29c1d07',
    'box-delivery-timestamp': ts,
    'box-signature-version': '1',
    'box-signature-algorithm': 'HmacSHA256',
    'box-signature-primary': hmac('sha256', primary, body + ts, 'base64'),
    'box-signature-secondary': hmac('sha256', secondary, body + ts, 'base64'),
  };
  const common = {
    provider: 'box',
    pkg: 'box-typescript-sdk-gen',
    fn: 'WebhooksManager.validateMessage',
    direction: 'sdk-verifies',
    headers,
    body,
  };
  await add({
    ...common,
    secret: primary,
    signatureHeaders: ['box-signature-primary', 'box-delivery-timestamp'],
    verify: (v) => WebhooksManager.validateMessage(v.body, v.headers, primary, { secondaryKey: secondary }),
  });
  // The SDK is given only the secondary key (the primary is another
  // one): the secondary signature alone carries the delivery.
  await add({
    ...common,
    variant: 'secondary-key',
    secret: secondary,
    signSkip: "hookline's Signer writes box-signature-primary only",
    verify: (v) => WebhooksManager.validateMessage(v.body, v.headers, 'not-the-primary-key', { secondaryKey: secondary }),
  });
}

// --- ElevenLabs: the SDK verifies (webhooks.constructEvent, which refuses
// a timestamp older than 30 minutes).
{
  const { ElevenLabsClient } = require('@elevenlabs/elevenlabs-js');
  const client = new ElevenLabsClient({ apiKey: 'hookline-elevenlabs-api-key' });
  const secret = 'wsec_hookline_elevenlabs_webhook_secret';
  const body = `{"type":"post_call_transcription","event_timestamp":${T},"data":{"agent_id":"agent_7101k5zvyjhmfg983brhmhkd98n6","conversation_id":"conv_0201k5zw2f4bfx0tv8yq1r5e2m3s","status":"done","transcript":[{"role":"agent","message":"Hello, how can I help?","time_in_call_secs":0}],"metadata":{"start_time_unix_secs":${T - 60},"call_duration_secs":58}}}`;
  await add({
    provider: 'elevenlabs',
    pkg: '@elevenlabs/elevenlabs-js',
    fn: 'client.webhooks.constructEvent',
    direction: 'sdk-verifies',
    secret,
    headers: { ...json(), 'ElevenLabs-Signature': `t=${T},v0=${hmac('sha256', secret, `${T}.${body}`, 'hex')}` },
    body,
    signatureHeaders: ['ElevenLabs-Signature'],
    verify: (v) => client.webhooks.constructEvent(v.body, v.headers['ElevenLabs-Signature'], secret),
  });
}

// --- LINE Messaging API: the SDK verifies (validateSignature, which the
// SDK's middleware runs on x-line-signature).
{
  const { validateSignature } = await import('@line/bot-sdk');
  const secret = 'hookline0line0channel0secret0000';
  const body = `{"destination":"U1a5c4d35e8cb0c3e7a7b55a8a3c7f0b2","events":[{"type":"message","message":{"type":"text","id":"468789577898262530","quoteToken":"q3Plxr4AgKd","text":"Hello"},"webhookEventId":"01JDZ4B4X9V5T2Q8K6M3N7P1R0","deliveryContext":{"isRedelivery":false},"timestamp":${TMS},"source":{"type":"user","userId":"U4af4980629a5bd0b1a8b9b2bb5a1b2c3"},"replyToken":"b60d432864f44d079f6d8efe86cf404b","mode":"active"}]}`;
  await add({
    provider: 'line',
    pkg: '@line/bot-sdk',
    fn: 'validateSignature',
    direction: 'sdk-verifies',
    secret,
    headers: { ...json(), 'x-line-signature': hmac('sha256', secret, body, 'base64') },
    body,
    signatureHeaders: ['x-line-signature'],
    verify: (v) => validateSignature(v.body, secret, v.headers['x-line-signature']),
  });
}

// --- Modern Treasury: the SDK signs (webhooks.getSignature) and verifies
// (webhooks.validateSignature).
{
  const mt = require('modern-treasury');
  const ModernTreasury = mt.default || mt.ModernTreasury || mt;
  const secret = 'hookline-modern-treasury-webhook-key';
  const client = new ModernTreasury({ apiKey: 'hookline-api-key', organizationID: 'hookline-org', webhookKey: secret });
  const body = '{"event":"completed","data":{"id":"e7d6a6b2-3c1f-4e4b-9a1d-5f0c2b8e7a10","object":"payment_order","type":"ach","amount":2000,"direction":"credit","currency":"USD","status":"completed","live_mode":false,"created_at":"2026-11-30T12:00:00Z","updated_at":"2026-11-30T12:00:00Z"}}';
  await add({
    provider: 'moderntreasury',
    pkg: 'modern-treasury',
    fn: 'webhooks.getSignature + webhooks.validateSignature',
    direction: 'sdk-signs',
    secret,
    headers: {
      ...json(),
      'X-Signature': client.webhooks.getSignature(body),
      'X-Webhook-ID': '2a9a4e3c-0b1d-4f5e-8c7b-6d5e4f3a2b10',
      'X-Topic': 'payment_order',
      'X-Live-Mode': 'false',
    },
    body,
    signatureHeaders: ['X-Signature'],
    verify: (v) => client.webhooks.validateSignature(v.body, { 'X-Signature': v.headers['X-Signature'] }),
  });
}

// --- Pusher Channels: the SDK signs (the app token's sign, which its
// webhook check compares with) and verifies (pusher.webhook(...).isValid,
// which also requires the app key in x-pusher-key and a JSON content type).
{
  const Pusher = require('pusher');
  const key = '278d425bdf160c739803';
  const secret = 'hookline0pusher0app0secret0';
  const pusher = new Pusher({ appId: '1904112', key, secret, cluster: 'mt1' });
  const body = `{"time_ms":${TMS},"events":[{"name":"channel_occupied","channel":"private-hookline-42"}]}`;
  await add({
    provider: 'pusher',
    pkg: 'pusher',
    fn: 'config.token.sign + webhook(request).isValid',
    direction: 'sdk-signs',
    secret,
    headers: { 'content-type': 'application/json', 'x-pusher-key': key, 'x-pusher-signature': pusher.config.token.sign(body) },
    body,
    signatureHeaders: ['x-pusher-signature'],
    verify: (v) => pusher.webhook({ headers: v.headers, rawBody: v.body }).isValid(),
  });
}

// --- Sanity: the SDK signs (encodeSignatureHeader) and verifies
// (isValidSignature). The signature is URL-safe base64 without padding, the
// timestamp milliseconds; the SDK checks no age.
{
  const { encodeSignatureHeader, isValidSignature } = require('@sanity/webhook');
  const secret = 'hookline-sanity-webhook-secret';
  const body = '{"_id":"post-hookline","_type":"post","_rev":"Jl2kqD9tQk3x7Jm5yVv3Ab","title":"Webhooks with hookline","slug":{"_type":"slug","current":"webhooks-with-hookline"},"publishedAt":"2026-11-30T12:00:00Z","version":2}';
  await add({
    provider: 'sanity',
    pkg: '@sanity/webhook',
    fn: 'encodeSignatureHeader + isValidSignature',
    direction: 'sdk-signs',
    secret,
    headers: {
      ...json(),
      'sanity-webhook-signature': await encodeSignatureHeader(body, TMS, secret),
      'idempotency-key': 'idem-5c0a2b1d-7e3f-4a9b-8c6d-1f2e3a4b5c6d',
      'sanity-operation': 'update',
      'sanity-transaction-time': ISO,
      'sanity-document-id': 'post-hookline',
      'sanity-project-id': '3do82whm',
      'sanity-dataset': 'production',
    },
    body,
    signatureHeaders: ['sanity-webhook-signature'],
    verify: (v) => isValidSignature(v.body, v.headers['sanity-webhook-signature'], secret),
  });
}

// --- Stream (Chat): the SDK verifies (StreamChat.verifyWebhook, the
// server client's check of X-Signature with the app's API secret).
{
  const { StreamChat } = require('stream-chat');
  const secret = 'hookline0stream0api0secret0000000000000000000000000000000000000000';
  const client = new StreamChat('mmhfdzb5evj2', secret);
  const body = '{"type":"message.new","cid":"messaging:hookline","channel_id":"hookline","channel_type":"messaging","message":{"id":"a7f3e2b1-4c5d-4e6f-8a9b-0c1d2e3f4a5b","text":"Hello","type":"regular","user":{"id":"jon"},"created_at":"2026-11-30T12:00:00.000000Z"},"user":{"id":"jon"},"watcher_count":1,"created_at":"2026-11-30T12:00:00.000000Z"}';
  await add({
    provider: 'streamchat',
    pkg: 'stream-chat',
    fn: 'StreamChat.verifyWebhook',
    direction: 'sdk-verifies',
    secret,
    headers: {
      ...json(),
      'X-Signature': hmac('sha256', secret, body, 'hex'),
      'X-Webhook-Id': '9b0c8d7e-6f5a-4b3c-2d1e-0f9a8b7c6d5e',
      'X-Webhook-Attempt': '1',
      'X-Api-Key': 'mmhfdzb5evj2',
    },
    body,
    signatureHeaders: ['X-Signature'],
    verify: (v) => client.verifyWebhook(v.body, v.headers['X-Signature']),
  });
}

// --- Increase: the SDK verifies (events.unwrap with headers, which checks
// the Standard Webhooks signature and time with the webhook secret's text
// as the key: it passes 'whsec_' + base64(secret) to the standardwebhooks
// library).
{
  const inc = require('increase');
  const Increase = inc.default || inc.Increase || inc;
  const secret = 'hookline-increase-webhook-secret';
  const client = new Increase({ apiKey: 'hookline-api-key', webhookSecret: secret });
  const id = 'msg_2xXincreaseSdkVector01';
  const body = `{"id":"event_001dzz0r20rzr4zrhrr1364hy80","associated_object_id":"transaction_uyrp7fld2ium70oa7oi","associated_object_type":"transaction","category":"transaction.created","created_at":"${ISO}","type":"event"}`;
  const sig = 'v1,' + hmac('sha256', Buffer.from(secret, 'utf8'), `${id}.${T}.${body}`, 'base64');
  await add({
    provider: 'increase',
    pkg: 'increase',
    fn: 'events.unwrap(body, {headers, key})',
    direction: 'sdk-verifies',
    secret,
    headers: { ...json(), 'webhook-id': id, 'webhook-timestamp': String(T), 'webhook-signature': sig },
    body,
    signatureHeaders: ['webhook-signature', 'webhook-timestamp'],
    verify: (v) => client.events.unwrap(v.body, { headers: v.headers, key: secret }),
  });
}

// --- Liveblocks: the SDK verifies (WebhookHandler.verifyRequest: Standard
// Webhooks with a whsec_ secret, ±5 minutes, and a known event type).
{
  const { WebhookHandler } = require('@liveblocks/node');
  const secret = 'whsec_' + Buffer.from('hookline liveblocks webhook secret 1').toString('base64');
  const handler = new WebhookHandler(secret);
  const id = 'msg_2xXliveblocksSdkVector1';
  const body = `{"type":"storageUpdated","data":{"roomId":"hookline-room","projectId":"605a50b01a36d5ea7a2e9104","updatedAt":"${ISO}","version":2}}`;
  const sig = 'v1,' + hmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'), `${id}.${T}.${body}`, 'base64');
  await add({
    provider: 'liveblocks',
    pkg: '@liveblocks/node',
    fn: 'WebhookHandler.verifyRequest',
    direction: 'sdk-verifies',
    secret,
    headers: { ...json(), 'webhook-id': id, 'webhook-timestamp': String(T), 'webhook-signature': sig },
    body,
    signatureHeaders: ['webhook-signature', 'webhook-timestamp'],
    verify: (v) => handler.verifyRequest({ headers: v.headers, rawBody: v.body }),
  });
}

// --- SendGrid (Signed Event Webhook): the SDK verifies
// (EventWebhook.verifySignature, with the key read by
// EventWebhook.convertPublicKeyToECDSA). SendGrid signs with its own ECDSA
// P-256 key, so a key pair made here with node:crypto stands in for it: the
// signature is ECDSA-SHA256 over the timestamp header followed by the raw
// body, DER, base64; the secret is the public half as SendGrid shows it (the
// base64 of its DER SubjectPublicKeyInfo). The body is a batch of three
// events, one a line (CRLF-terminated), as SendGrid writes them.
{
  const { EventWebhook, EventWebhookHeader } = require('@sendgrid/eventwebhook');
  const ew = new EventWebhook();
  const spki = (k) => k.export({ type: 'spki', format: 'der' }).toString('base64');
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const other = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey;
  const sigHeader = EventWebhookHeader.SIGNATURE();
  const tsHeader = EventWebhookHeader.TIMESTAMP();
  const msg = '14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0';
  const body =
    `[{"email":"jon@example.com","event":"processed","send_at":0,"sg_event_id":"cHJvY2Vzc2VkLTEyMzQ1Njc4LXNka3ZlY3RvcjE","sg_message_id":"${msg}","smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","timestamp":${T - 14}},\r\n` +
    `{"email":"jon@example.com","event":"delivered","ip":"168.1.1.1","response":"250 OK","sg_event_id":"ZGVsaXZlcmVkLTAtMTIzNDU2Nzgtc2RrdmVjdG9yMQ","sg_message_id":"${msg}","smtp-id":"<14c5d75ce93.dfd.64b469@ismtpd-555>","timestamp":${T - 12},"tls":1},\r\n` +
    `{"email":"jon@example.com","event":"open","ip":"255.255.255.255","sg_event_id":"b3Blbi0xMjM0NTY3OC1zZGt2ZWN0b3Ix","sg_machine_open":false,"sg_message_id":"${msg}","timestamp":${T - 10},"useragent":"Mozilla/5.0"}]\r\n`;
  const ts = String(T);
  const sig = crypto.sign('sha256', Buffer.from(ts + body), privateKey).toString('base64'); // EC: DER by default
  await add({
    provider: 'sendgrid',
    pkg: '@sendgrid/eventwebhook',
    fn: 'EventWebhook.convertPublicKeyToECDSA + EventWebhook.verifySignature',
    direction: 'sdk-verifies',
    secret: spki(publicKey),
    otherSecret: spki(other),
    headers: { ...json(), [sigHeader]: sig, [tsHeader]: ts },
    body,
    signatureHeaders: [sigHeader, tsHeader],
    signSkip: 'SendGrid signs with its own private key: hookline holds the public key only and has no Signer (and ECDSA signatures are randomised)',
    note: 'signed here with a P-256 key made by node:crypto, standing in for SendGrid\'s; the secret is its public half',
    verify: (v) => ew.verifySignature(ew.convertPublicKeyToECDSA(v.secret), v.body, v.headers[sigHeader], v.headers[tsHeader]),
  });
}

if (failures.length) {
  for (const f of failures) console.error('FAIL', f);
  console.error(`${failures.length} failure(s): vectors.json not written`);
  process.exit(1);
}

const out = {
  comment: 'Generated by gen.mjs (make sdk-vectors); do not edit. See README.md.',
  generated_at: new Date(TMS).toISOString(),
  node: process.version,
  vectors,
};
fs.writeFileSync(path.join(here, 'vectors.json'), JSON.stringify(out, null, 2) + '\n');
console.log(`wrote ${vectors.length} vectors (${new Set(vectors.map((v) => v.provider)).size} providers) to vectors.json`);
