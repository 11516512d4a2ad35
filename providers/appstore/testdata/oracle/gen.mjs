// gen.mjs records App Store Server Notifications V2 vectors with Apple's
// App Store Server Library for Node.js, @apple/app-store-server-library
// (github.com/apple/app-store-server-library-node), for
// providers/appstore/oracle_test.go. Run it here with `npm ci && node gen.mjs`;
// it writes ../oracle_vectors.json.
//
// It makes test certificate chains with openssl shaped like Apple's (a P-384
// root, a P-384 intermediate carrying Apple's marker extension
// 1.2.840.113635.100.6.2.1, a P-256 leaf carrying 1.2.840.113635.100.6.11.1),
// signs notifications as Apple does (a compact ES256 JWS whose header carries
// x5c: leaf, intermediate, root), and asks the library's SignedDataVerifier
// (verifyAndDecodeNotification; the test root as its only trusted root,
// online checks off, the vector's bundleId, appAppleId and environment) about
// genuine notifications and tampered twins. Every vector records the
// library's verdict. The script exits non-zero, writing nothing, when the
// library rejects a genuine vector or accepts a tampered one.

import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const { SignedDataVerifier, Environment, VerificationException, VerificationStatus } = require('@apple/app-store-server-library');
const libraryVersion = JSON.parse(fs.readFileSync(
  path.join(here, 'node_modules', '@apple', 'app-store-server-library', 'package.json'), 'utf8')).version;

const DAY = 24 * 3600 * 1000;

// ---- certificate chains (openssl) ----

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'appstore-vectors-'));
process.on('exit', () => fs.rmSync(tmp, { recursive: true, force: true }));

const reqConfig = path.join(tmp, 'req.cnf');
fs.writeFileSync(reqConfig, '[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = unused\n');
const extConfig = path.join(tmp, 'ext.cnf');
fs.writeFileSync(extConfig, `
[root]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[intermediate]
basicConstraints = critical,CA:TRUE,pathlen:0
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
1.2.840.113635.100.6.2.1 = DER:0500
[intermediate_nooid]
basicConstraints = critical,CA:TRUE,pathlen:0
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[leaf]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
authorityKeyIdentifier = keyid
1.2.840.113635.100.6.11.1 = DER:0500
[leaf_nooid]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
authorityKeyIdentifier = keyid
`);

let serial = 1000;
function openssl(...args) {
  try {
    return execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    process.stderr.write(e.stderr ?? '');
    throw e;
  }
}

// cert makes a key on curve and a certificate for subject with the
// extensions of section ext, issued by issuer (self-signed without one),
// valid for days from now. It returns {key, keyFile, pemFile, der}.
function cert(name, curve, subject, ext, days, issuer) {
  const keyFile = path.join(tmp, name + '.key');
  const csr = path.join(tmp, name + '.csr');
  const pemFile = path.join(tmp, name + '.pem');
  openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:' + curve, '-out', keyFile);
  openssl('req', '-new', '-config', reqConfig, '-key', keyFile, '-subj', subject, '-out', csr);
  const sign = issuer ? ['-CA', issuer.pemFile, '-CAkey', issuer.keyFile] : ['-signkey', keyFile];
  openssl('x509', '-req', '-in', csr, ...sign, '-set_serial', String(serial++), '-days', String(days), '-sha384',
    '-extfile', extConfig, '-extensions', ext, '-out', pemFile);
  const pem = fs.readFileSync(pemFile, 'utf8');
  const x509 = new crypto.X509Certificate(pem);
  return { key: crypto.createPrivateKey(fs.readFileSync(keyFile)), keyFile, pemFile, pem, der: x509.raw, x509 };
}

function chain(label, { intermediateExt = 'intermediate', leafExt = 'leaf', leafDays = 30, root } = {}) {
  const o = '/O=hookline/OU=' + label;
  root = root ?? cert(label + '-root', 'P-384', '/CN=hookline oracle root CA (not Apple)' + o, 'root', 3650);
  const intermediate = cert(label + '-intermediate', 'P-384', '/CN=hookline oracle intermediate CA (not Apple)' + o, intermediateExt, 3650, root);
  const leaf = cert(label + '-leaf', 'P-256', '/CN=hookline oracle App Store signing (not Apple)' + o, leafExt, leafDays, intermediate);
  return { root, intermediate, leaf, x5c: [leaf, intermediate, root].map((c) => c.der.toString('base64')) };
}

const trusted = chain('trusted');
const noLeafOID = chain('no-leaf-oid', { leafExt: 'leaf_nooid', root: trusted.root });
const noIntermediateOID = chain('no-intermediate-oid', { intermediateExt: 'intermediate_nooid', root: trusted.root });
const foreign = chain('foreign');

// The signing time: a whole second after the leaf's notBefore (openssl
// makes it the current second), so that every certificate is current.
const leafFrom = Date.parse(trusted.leaf.x509.validFrom);
const leafTo = Date.parse(trusted.leaf.x509.validTo);
const T = Math.floor(Math.max(Date.now(), leafFrom) / 1000) * 1000 + 1000;

// ---- signing as Apple does ----

const b64url = (b) => Buffer.from(b).toString('base64url');

function signInput(input, key) {
  return input + '.' + crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url');
}

function jws(payload, { c = trusted, x5c = c.x5c, key = c.leaf.key, header } = {}) {
  const h = header ?? { alg: 'ES256', x5c };
  return signInput(b64url(JSON.stringify(h)) + '.' + b64url(typeof payload === 'string' ? payload : JSON.stringify(payload)), key);
}

const body = (signedPayload) => JSON.stringify({ signedPayload });

const BUNDLE = 'com.example.hookline';
const APP_ID = 1234567890;

function transaction(env, signedDate) {
  return jws({
    transactionId: '2000000123456789', originalTransactionId: '2000000123456789', bundleId: BUNDLE,
    productId: 'com.example.hookline.pro.monthly', type: 'Auto-Renewable Subscription', purchaseDate: signedDate - DAY,
    expiresDate: signedDate + 29 * DAY, environment: env, storefront: 'USA', signedDate,
  });
}

function renewal(env, signedDate) {
  return jws({
    originalTransactionId: '2000000123456789', autoRenewProductId: 'com.example.hookline.pro.monthly',
    productId: 'com.example.hookline.pro.monthly', autoRenewStatus: 0, environment: env, signedDate,
  });
}

// notification is a decoded payload; data holds the app and, with full, a
// signed transaction and renewal (each a JWS with its own x5c: most vectors
// leave them out to keep the file small). null leaves appAppleId, signedDate or
// the notificationUUID out.
function notification({ type, subtype, env = 'Production', appAppleId = env === 'Production' ? APP_ID : null,
  bundleId = BUNDLE, signedDate = T, uuid = crypto.randomUUID(), full = false }) {
  const data = { bundleId, bundleVersion: '42', environment: env };
  if (appAppleId !== null) data.appAppleId = appAppleId;
  if (full) {
    data.signedTransactionInfo = transaction(env, signedDate ?? T);
    data.signedRenewalInfo = renewal(env, signedDate ?? T);
    data.status = 1;
  }
  const n = { notificationType: type };
  if (subtype !== undefined) n.subtype = subtype;
  if (uuid !== null) n.notificationUUID = uuid;
  Object.assign(n, { data, version: '2.0' });
  if (signedDate !== null) n.signedDate = signedDate;
  return n;
}

// ---- the vectors ----

const vectors = [];

// add records a body and what the library says of it, verifying as a
// source configured with env, bundleId and appAppleId would.
function add(name, kind, signedPayload, { env = 'Production', bundleId = BUNDLE, appAppleId = env === 'Production' ? APP_ID : null,
  noEventID = false } = {}) {
  vectors.push({ name, kind, environment: env, bundleId, appAppleId, body: body(signedPayload), noEventID });
}

// Genuine notifications.
const prodSubtype = notification({ type: 'DID_CHANGE_RENEWAL_STATUS', subtype: 'AUTO_RENEW_DISABLED', full: true });
const prodSubtypeJWS = jws(prodSubtype);
add('production-with-subtype', 'genuine', prodSubtypeJWS);
add('production-without-subtype', 'genuine', jws(notification({ type: 'DID_RENEW' })));
add('sandbox-with-subtype', 'genuine', jws(notification({ type: 'SUBSCRIBED', subtype: 'INITIAL_BUY', env: 'Sandbox', full: true })), { env: 'Sandbox' });
add('sandbox-without-subtype', 'genuine', jws(notification({ type: 'TEST', env: 'Sandbox' })), { env: 'Sandbox' });
add('production-summary', 'genuine', jws({
  notificationType: 'RENEWAL_EXTENSION', subtype: 'SUMMARY', notificationUUID: crypto.randomUUID(), version: '2.0', signedDate: T,
  summary: { requestIdentifier: crypto.randomUUID(), environment: 'Production', appAppleId: APP_ID, bundleId: BUNDLE,
    productId: 'com.example.hookline.pro.monthly', storefrontCountryCodes: ['USA', 'CAN'], succeededCount: 5, failedCount: 2 },
}));
const ept = (externalPurchaseId) => ({
  notificationType: 'EXTERNAL_PURCHASE_TOKEN', subtype: 'UNREPORTED', notificationUUID: crypto.randomUUID(), version: '2.0', signedDate: T,
  externalPurchaseToken: { externalPurchaseId, tokenCreationDate: T - DAY, appAppleId: APP_ID, bundleId: BUNDLE },
});
add('production-external-purchase-token', 'genuine', jws(ept(crypto.randomUUID())));
add('sandbox-external-purchase-token', 'genuine', jws(ept('SANDBOX_' + crypto.randomUUID())), { env: 'Sandbox' });
add('production-app-data', 'genuine', jws({
  notificationType: 'RESCIND_CONSENT', notificationUUID: crypto.randomUUID(), version: '2.0', signedDate: T,
  appData: { appAppleId: APP_ID, bundleId: BUNDLE, environment: 'Production', signedAppTransactionInfo: transaction('Production', T) },
}));
// The library does not check appAppleId in the sandbox.
add('sandbox-app-apple-id-not-checked', 'genuine', jws(notification({ type: 'DID_RENEW', env: 'Sandbox', appAppleId: 7 })),
  { env: 'Sandbox', appAppleId: 42 });
// Verified, but with no id to store.
add('no-notification-uuid', 'genuine', jws(notification({ type: 'DID_RENEW', uuid: null })), { noEventID: true });
// No signedDate: the chain is checked at the verifier's clock.
add('no-signed-date', 'genuine', jws(notification({ type: 'DID_RENEW', signedDate: null })));
// Within the library's 60 s skew of the leaf's validity.
add('signed-date-30s-after-leaf-expiry', 'genuine', jws(notification({ type: 'DID_RENEW', signedDate: leafTo + 30000 })));
add('signed-date-30s-before-leaf-start', 'genuine', jws(notification({ type: 'DID_RENEW', signedDate: leafFrom - 30000 })));

// Tampered twins: of the first genuine one (one byte inside its
// signedTransactionInfo), and of a smaller one.
const flip = (s, i) => s.slice(0, i) + String.fromCharCode(s.charCodeAt(i) ^ 1) + s.slice(i + 1);
{
  const [fh64, fp64, fs64] = prodSubtypeJWS.split('.');
  const text = Buffer.from(fp64, 'base64url').toString();
  add('inner-jws-byte-changed', 'tampered', fh64 + '.' + b64url(flip(text, text.indexOf('signedTransactionInfo') + 200)) + '.' + fs64);
}
const small = notification({ type: 'DID_CHANGE_RENEWAL_STATUS', subtype: 'AUTO_RENEW_DISABLED' });
const [h64, p64, s64] = jws(small).split('.');
const payloadText = Buffer.from(p64, 'base64url').toString();
add('payload-byte-changed', 'tampered', h64 + '.' + b64url(flip(payloadText, payloadText.indexOf(small.notificationUUID) + 3)) + '.' + s64);
add('payload-subtype-removed', 'tampered', h64 + '.' + b64url(payloadText.replace('"subtype":"AUTO_RENEW_DISABLED",', '')) + '.' + s64);
const headerText = Buffer.from(h64, 'base64url').toString();
add('header-changed', 'tampered', b64url(headerText.replace('{', '{"typ":"JWT",')) + '.' + p64 + '.' + s64);
const sig = Buffer.from(s64, 'base64url');
sig[10] ^= 1;
add('signature-byte-changed', 'tampered', h64 + '.' + p64 + '.' + sig.toString('base64url'));
add('signature-removed', 'tampered', h64 + '.' + p64 + '.');
const otherKey = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
add('wrong-key', 'tampered', jws(notification({ type: 'DID_RENEW' }), { key: otherKey }));
add('foreign-chain', 'tampered', jws(notification({ type: 'DID_RENEW' }), { c: foreign }));
add('foreign-chain-trusted-root-in-x5c', 'tampered',
  jws(notification({ type: 'DID_RENEW' }), { c: foreign, x5c: [foreign.x5c[0], foreign.x5c[1], trusted.x5c[2]] }));
add('leaf-without-oid', 'tampered', jws(notification({ type: 'DID_RENEW' }), { c: noLeafOID }));
add('intermediate-without-oid', 'tampered', jws(notification({ type: 'DID_RENEW' }), { c: noIntermediateOID }));
add('leaf-expired-at-signed-date', 'tampered', jws(notification({ type: 'DID_RENEW', signedDate: leafTo + DAY })));
add('leaf-not-yet-valid-at-signed-date', 'tampered', jws(notification({ type: 'DID_RENEW', signedDate: leafFrom - DAY })));
add('signed-date-90s-after-leaf-expiry', 'tampered', jws(notification({ type: 'DID_RENEW', signedDate: leafTo + 90000 })));
add('wrong-bundle-id', 'tampered', jws(notification({ type: 'DID_RENEW', bundleId: 'com.example.other' })));
add('wrong-app-apple-id', 'tampered', jws(notification({ type: 'DID_RENEW', appAppleId: APP_ID + 1 })));
add('no-app-apple-id-in-production', 'tampered', jws(notification({ type: 'DID_RENEW', appAppleId: null })));
add('sandbox-notification-production-source', 'tampered', jws(notification({ type: 'DID_RENEW', env: 'Sandbox', appAppleId: APP_ID })));
add('production-notification-sandbox-source', 'tampered', jws(notification({ type: 'DID_RENEW' })), { env: 'Sandbox' });
add('environment-lowercase', 'tampered', jws(notification({ type: 'DID_RENEW', env: 'production', appAppleId: APP_ID })));
add('sandbox-external-purchase-token-production-source', 'tampered', jws(ept('SANDBOX_' + crypto.randomUUID())));
add('no-app', 'tampered', jws({ notificationType: 'TEST', notificationUUID: crypto.randomUUID(), version: '2.0', signedDate: T }));
add('x5c-2-certificates', 'tampered', jws(notification({ type: 'DID_RENEW' }), { x5c: trusted.x5c.slice(0, 2) }));
add('x5c-4-certificates', 'tampered', jws(notification({ type: 'DID_RENEW' }), { x5c: [...trusted.x5c, trusted.x5c[2]] }));
add('no-x5c', 'tampered', jws(notification({ type: 'DID_RENEW' }), { header: { alg: 'ES256' } }));
add('alg-none', 'tampered', b64url(JSON.stringify({ alg: 'none', x5c: trusted.x5c })) + '.' + p64 + '.');
add('alg-hs256', 'tampered', (() => {
  const input = b64url(JSON.stringify({ alg: 'HS256', x5c: trusted.x5c })) + '.' + p64;
  return input + '.' + crypto.createHmac('sha256', trusted.leaf.x509.publicKey.export({ type: 'spki', format: 'pem' })).update(input).digest('base64url');
})());
add('signed-date-string', 'tampered', jws(notification({ type: 'DID_RENEW', signedDate: String(T) })));

// ---- the library's verdicts ----

function verifier(v) {
  const env = v.environment === 'Sandbox' ? Environment.SANDBOX : Environment.PRODUCTION;
  return new SignedDataVerifier([trusted.root.der], false, env, v.bundleId, v.appAppleId ?? undefined);
}

const failures = [];
for (const v of vectors) {
  const { signedPayload } = JSON.parse(v.body);
  try {
    const n = await verifier(v).verifyAndDecodeNotification(signedPayload);
    Object.assign(v, { valid: true, status: 'OK', error: '' });
    v.notificationUUID = n.notificationUUID ?? '';
    v.type = n.subtype ? n.notificationType + '.' + n.subtype : (n.notificationType ?? '');
    v.signedDate = n.signedDate ?? null;
  } catch (e) {
    if (!(e instanceof VerificationException)) throw e;
    // The library re-wraps some of its own exceptions (INVALID_CHAIN_LENGTH
    // becomes INVALID_CERTIFICATE): the cause's status is recorded too.
    const cause = e.cause instanceof VerificationException ? 'caused by ' + VerificationStatus[e.cause.status]
      : e.cause ? String(e.cause.message ?? e.cause) : '';
    Object.assign(v, { valid: false, status: VerificationStatus[e.status], error: cause });
  }
  if (v.valid !== (v.kind === 'genuine')) failures.push(`${v.name}: the library says ${v.status} ${v.error}`);
}
if (failures.length) {
  console.error('the library disagrees with the generator; nothing written:\n  ' + failures.join('\n  '));
  process.exit(1);
}

const out = {
  library: { package: '@apple/app-store-server-library', version: libraryVersion },
  comment: 'Generated by testdata/oracle/gen.mjs; replayed by oracle_test.go. Test chains only: not Apple\'s keys.',
  time: T,
  root: trusted.root.pem,
  vectors,
};
fs.writeFileSync(path.join(here, '..', 'oracle_vectors.json'), JSON.stringify(out, null, 2) + '\n');
console.log(`wrote ${vectors.length} vectors (${vectors.filter((v) => v.valid).length} valid) with ${out.library.package}@${libraryVersion}`);
