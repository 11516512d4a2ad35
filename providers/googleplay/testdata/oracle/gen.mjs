// gen.mjs records the verdicts of Google's own library for Node.js,
// google-auth-library (github.com/googleapis/google-auth-library-nodejs), on
// the ID tokens an authenticated Pub/Sub push carries, for
// providers/googleplay/oracle_test.go. Run it here with
// `npm ci && node gen.mjs`; it writes ../oracle_vectors.json.
//
// It makes an RSA key (node:crypto), signs genuine tokens with the claims
// Pub/Sub puts in a push's token (aud, azp, email, email_verified, exp, iat,
// iss, sub) and bad twins (another key, an unknown kid, a tampered payload
// or signature, alg none and HS256, a wrong aud or iss, expired, not yet
// valid, too long-lived), and asks the library about each with
//
//	new OAuth2Client().verifySignedJwtWithCertsAsync(token, {[kid]: pem}, audience, issuers)
//
// the call OAuth2Client.verifyIdToken makes once it has Google's
// certificates (in Node it fetches them as PEM from …/oauth2/v1/certs; here
// the map holds our key's PEM instead). issuers are Google's two ID-token
// issuers; verifyIdToken's default list adds the client's universe domain
// (googleapis.com), which hookline does not accept. The library reads the
// clock with `new Date()`: Date is replaced by one fixed at a whole second,
// the recorded `time`, so that vectors can sit on the boundaries of its
// clock-skew rules.
//
// Every vector records the library's verdict. The script exits non-zero,
// writing nothing, when the library rejects a genuine token, accepts a bad
// one, or rejects a token of the "stricter" kind: tokens the library
// accepts because it leaves a check to its caller (email, email_verified)
// or does not read alg, which hookline refuses.

import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const { OAuth2Client } = require('google-auth-library');
const libVersion = JSON.parse(fs.readFileSync(path.join(here, 'node_modules', 'google-auth-library', 'package.json'), 'utf8')).version;

// ---- keys ----

const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const other = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const kid = crypto.randomBytes(20).toString('hex'); // Google's kids: 40 hex digits
const unknownKid = crypto.randomBytes(20).toString('hex');
const pem = publicKey.export({ type: 'spki', format: 'pem' });
const { n, e } = publicKey.export({ format: 'jwk' });
const jwks = { keys: [{ kty: 'RSA', alg: 'RS256', use: 'sig', kid, n, e }] };

// ---- the clock, fixed ----

const T = Math.floor(Date.now() / 1000);
const RealDate = Date;
class FixedDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(T * 1000);
    else super(...args);
  }
  static now() { return T * 1000; }
}
globalThis.Date = FixedDate;

// ---- tokens ----

const audience = 'https://hooks.example.com/webhooks/googleplay';
const serviceAccount = 'rtdn-push@hookline-example.iam.gserviceaccount.com';
const subject = '1' + crypto.randomInt(1e9, 1e10 - 1) + '' + crypto.randomInt(1e9, 1e10 - 1); // 21 digits
const issuers = ['accounts.google.com', 'https://accounts.google.com'];

const b64url = (b) => Buffer.from(b).toString('base64url');

// claims are those of a Pub/Sub push's token, valid an hour from T.
function claims(over = {}) {
  return {
    aud: audience, azp: subject, email: serviceAccount, email_verified: true,
    exp: T + 3600, iat: T, iss: 'https://accounts.google.com', sub: subject, ...over,
  };
}

function sign({ header = { alg: 'RS256', kid, typ: 'JWT' }, payload = claims(), key = privateKey } = {}) {
  const input = b64url(JSON.stringify(header)) + '.' + b64url(JSON.stringify(payload));
  return input + '.' + b64url(crypto.sign('sha256', Buffer.from(input), key));
}

// flip changes the base64url character at i of part p (0 header, 1
// payload, 2 signature) to another one.
function flip(token, p, i) {
  const parts = token.split('.');
  const s = parts[p];
  const c = s[i] === 'A' ? 'B' : 'A';
  parts[p] = s.slice(0, i) + c + s.slice(i + 1);
  return parts.join('.');
}

const genuine = sign();
const [h64, , s64] = genuine.split('.');
const hs256Input = b64url(JSON.stringify({ alg: 'HS256', kid, typ: 'JWT' })) + '.' + b64url(JSON.stringify(claims()));

const cases = [
  // genuine: the library accepts them, and so must hookline.
  { name: 'genuine', kind: 'genuine', token: genuine },
  { name: 'genuine/iss-without-scheme', kind: 'genuine', token: sign({ payload: claims({ iss: 'accounts.google.com' }) }) },
  { name: 'genuine/iat-skew-edge', kind: 'genuine', token: sign({ payload: claims({ iat: T + 300, exp: T + 3900 }) }) },
  { name: 'genuine/exp-skew-edge', kind: 'genuine', token: sign({ payload: claims({ iat: T - 3900, exp: T - 300 }) }) },
  { name: 'genuine/lifetime-edge', kind: 'genuine', token: sign({ payload: claims({ exp: T + 86399 }) }) },
  // forged: not signed by the key of their kid.
  { name: 'forged/another-key', kind: 'forged', token: sign({ key: other.privateKey }) },
  { name: 'forged/unknown-kid', kind: 'forged', token: sign({ header: { alg: 'RS256', kid: unknownKid, typ: 'JWT' } }) },
  { name: 'forged/payload-replaced', kind: 'forged', token: h64 + '.' + b64url(JSON.stringify(claims({ sub: '1' + subject.slice(1).split('').reverse().join('') }))) + '.' + s64 },
  { name: 'forged/payload-byte', kind: 'forged', token: flip(genuine, 1, 40) },
  { name: 'forged/signature-byte', kind: 'forged', token: flip(genuine, 2, 100) },
  { name: 'forged/alg-none-unsigned', kind: 'forged', token: b64url(JSON.stringify({ alg: 'none', kid, typ: 'JWT' })) + '.' + b64url(JSON.stringify(claims())) + '.' },
  { name: 'forged/alg-hs256-keyed-with-the-pem', kind: 'forged', token: hs256Input + '.' + crypto.createHmac('sha256', pem).update(hs256Input).digest('base64url') },
  // claims: signed by the right key, refused for what they say.
  { name: 'claims/wrong-aud', kind: 'claims', token: sign({ payload: claims({ aud: 'https://hooks.example.com/webhooks/other' }) }) },
  { name: 'claims/aud-list', kind: 'claims', token: sign({ payload: claims({ aud: [audience] }) }) },
  { name: 'claims/wrong-iss', kind: 'claims', token: sign({ payload: claims({ iss: 'https://accounts.google.com.example' }) }) },
  { name: 'claims/iss-universe-domain', kind: 'claims', token: sign({ payload: claims({ iss: 'googleapis.com' }) }) },
  { name: 'claims/no-iat', kind: 'claims', token: sign({ payload: claims({ iat: undefined }) }) },
  { name: 'claims/no-exp', kind: 'claims', token: sign({ payload: claims({ exp: undefined }) }) },
  // time: the library's 300-second skew and 86400-second lifetime.
  { name: 'time/expired', kind: 'time', token: sign({ payload: claims({ iat: T - 3901, exp: T - 301 }) }) },
  { name: 'time/expired-long-ago', kind: 'time', token: sign({ payload: claims({ iat: T - 86400, exp: T - 82800 }) }) },
  { name: 'time/not-yet-valid', kind: 'time', token: sign({ payload: claims({ iat: T + 301, exp: T + 3901 }) }) },
  { name: 'time/lifetime-too-long', kind: 'time', token: sign({ payload: claims({ exp: T + 86400 }) }) },
  // stricter: the library accepts them; hookline must not.
  { name: 'stricter/wrong-email', kind: 'stricter', token: sign({ payload: claims({ email: 'someone-else@hookline-example.iam.gserviceaccount.com' }) }) },
  { name: 'stricter/email-unverified', kind: 'stricter', token: sign({ payload: claims({ email_verified: false }) }) },
  { name: 'stricter/no-email', kind: 'stricter', token: sign({ payload: claims({ email: undefined, email_verified: undefined }) }) },
  { name: 'stricter/alg-none-rsa-signed', kind: 'stricter', token: sign({ header: { alg: 'none', kid, typ: 'JWT' } }) },
];
const expect = { genuine: true, forged: false, claims: false, time: false, stricter: true };

// ---- ask the library ----

const client = new OAuth2Client();
const certs = { [kid]: pem };

async function verify(token) {
  try {
    await client.verifySignedJwtWithCertsAsync(token, certs, audience, issuers);
    return [true, ''];
  } catch (err) {
    return [false, String(err.message || err).slice(0, 160)];
  }
}

const vectors = [];
const failures = [];
for (const c of cases) {
  const [valid, error] = await verify(c.token);
  if (valid !== expect[c.kind]) {
    failures.push(`${c.name}: the library ${valid ? 'accepted' : 'rejected'} a ${c.kind} token (${error})`);
  }
  vectors.push({ name: c.name, kind: c.kind, token: c.token, valid, ...(error ? { error } : {}) });
}
if (OAuth2Client.CLOCK_SKEW_SECS_ !== 300 || OAuth2Client.DEFAULT_MAX_TOKEN_LIFETIME_SECS_ !== 86400) {
  failures.push(`the library's clock skew is ${OAuth2Client.CLOCK_SKEW_SECS_} s and its max token lifetime ${OAuth2Client.DEFAULT_MAX_TOKEN_LIFETIME_SECS_} s (hookline: 300 and 86400)`);
}
if (failures.length) {
  console.error('not written:\n  ' + failures.join('\n  '));
  process.exit(1);
}

// A push as Pub/Sub sends it, carrying a Developer Notification: what the
// Go test posts with each token (the token does not cover it).
const notification = {
  version: '1.0', packageName: 'com.example.hookline', eventTimeMillis: String(T * 1000 - 1500),
  subscriptionNotification: { version: '1.0', notificationType: 4, purchaseToken: crypto.randomBytes(24).toString('base64url'), subscriptionId: 'premium.monthly' },
};
const messageId = String(crypto.randomInt(1e11, 1e12));
const published = new RealDate((T - 1) * 1000).toISOString();
const body = JSON.stringify({
  message: {
    data: Buffer.from(JSON.stringify(notification)).toString('base64'),
    messageId, message_id: messageId, publishTime: published, publish_time: published,
  },
  subscription: 'projects/hookline-example/subscriptions/play-rtdn',
});

const out = {
  comment: 'Recorded by providers/googleplay/testdata/oracle/gen.mjs; replayed by providers/googleplay/oracle_test.go. Do not edit by hand.',
  library: { package: 'google-auth-library', version: libVersion },
  call: 'new OAuth2Client().verifySignedJwtWithCertsAsync(token, {[kid]: pem}, audience, issuers)',
  issuers,
  defaultIssuers: new OAuth2Client().issuers,
  clockSkewSeconds: OAuth2Client.CLOCK_SKEW_SECS_,
  maxTokenLifetimeSeconds: OAuth2Client.DEFAULT_MAX_TOKEN_LIFETIME_SECS_,
  time: T,
  timestamp: new RealDate(T * 1000).toISOString(),
  audience,
  serviceAccount,
  kid,
  jwks,
  pem,
  body,
  vectors,
};
fs.writeFileSync(path.join(here, '..', 'oracle_vectors.json'), JSON.stringify(out, null, 2) + '\n');
console.log(`wrote ${vectors.length} vectors (${vectors.filter((v) => v.valid).length} accepted by the library) with google-auth-library ${libVersion}`);
