// gen.mjs records Amazon SNS signature vectors with AWS's official message
// validator for Node.js, sns-validator (github.com/aws/aws-js-sns-message-validator),
// for providers/sns/validator_test.go. Run it here with `npm ci && node gen.mjs`;
// it writes ../validator_vectors.json.
//
// It makes an RSA key and a self-signed certificate (openssl), signs genuine
// SNS messages the way SNS does (SignatureVersion 1: SHA1withRSA, 2:
// SHA256withRSA, over "Key\nValue\n" for each signed key present), and asks
// the validator about each of them and about tampered twins. The validator
// fetches the certificate with https.get: that function is replaced here by a
// stub serving our certificate at one URL of AWS's shape, so the validator
// runs with its default host pattern. Every vector records the validator's
// verdict. The script exits non-zero, writing nothing, when the validator
// rejects a genuine vector, accepts a tampered one, or fetches a certificate
// URL it should have refused unfetched.
//
// UnsubscribeConfirmation is left out: sns-validator 0.3.5 checks it with
// the Notification keys (no Token), where AWS's documentation and AWS's PHP
// validator sign Token too; see README.md.

import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);
const here = path.dirname(fileURLToPath(import.meta.url));
const MessageValidator = require('sns-validator');
const validatorVersion = JSON.parse(fs.readFileSync(path.join(here, 'node_modules', 'sns-validator', 'package.json'), 'utf8')).version;

// ---- key and certificate ----

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sns-vectors-'));
let certPEM;
try {
  const keyFile = path.join(tmp, 'key.pem');
  const certFile = path.join(tmp, 'cert.pem');
  fs.writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  execFileSync('openssl', ['req', '-new', '-x509', '-key', keyFile, '-out', certFile, '-days', '3650', '-sha256',
    '-subj', '/CN=sns.amazonaws.com'], { stdio: ['ignore', 'ignore', 'inherit'] });
  certPEM = fs.readFileSync(certFile, 'utf8');
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
const cert = new crypto.X509Certificate(certPEM);

// The signing time: a whole second, after the certificate's notBefore, so
// that hookline, run at this time, finds the certificate current.
const T = Math.floor(Math.max(Date.now(), Date.parse(cert.validFrom)) / 1000) + 1;
const ISO = new Date(T * 1000).toISOString(); // 2026-12-03T08:30:01.000Z

const certURL = 'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-'
  + crypto.createHash('sha256').update(certPEM).digest('hex').slice(0, 32) + '.pem';
const topicArn = 'arn:aws:sns:us-east-1:123456789012:hookline-orders';

// ---- the validator's certificate download, stubbed ----

const fetched = [];
https.get = (u, cb) => {
  fetched.push(String(u));
  const req = new EventEmitter();
  const res = new EventEmitter();
  res.statusCode = String(u) === certURL ? 200 : 404;
  process.nextTick(() => {
    cb(res);
    if (res.statusCode === 200) res.emit('data', Buffer.from(certPEM));
    res.emit('end');
  });
  return req;
};

// ---- signing as SNS does ----

// The keys SNS signs, in order; each that the message carries is signed.
const signedKeys = ['Message', 'MessageId', 'Subject', 'SubscribeURL', 'Timestamp', 'Token', 'TopicArn', 'Type'];

function stringToSign(m) {
  let s = '';
  for (const k of signedKeys) {
    if (k in m) s += k + '\n' + m[k] + '\n';
  }
  return s;
}

function sign(m) {
  const alg = m.SignatureVersion === '2' ? 'RSA-SHA256' : 'RSA-SHA1';
  m.Signature = crypto.createSign(alg).update(stringToSign(m), 'utf8').sign(privateKey, 'base64');
  return m;
}

// body writes a message as SNS writes it: one key a line, `"Key" : value`.
function body(m) {
  return '{\n' + Object.entries(m).map(([k, v]) => '  ' + JSON.stringify(k) + ' : ' + JSON.stringify(v)).join(',\n') + '\n}';
}

function headers(m) {
  return {
    'x-amz-sns-message-type': m.Type,
    'x-amz-sns-message-id': m.MessageId,
    'x-amz-sns-topic-arn': m.TopicArn,
    'Content-Type': 'text/plain; charset=UTF-8',
    'User-Agent': 'Amazon Simple Notification Service Agent',
  };
}

const uuid = () => crypto.randomUUID();

function notification(version, subject, message) {
  const m = { Type: 'Notification', MessageId: uuid(), TopicArn: topicArn };
  if (subject !== undefined) m.Subject = subject;
  Object.assign(m, {
    Message: message,
    Timestamp: ISO,
    SignatureVersion: version,
    Signature: '',
    SigningCertURL: certURL,
    UnsubscribeURL: 'https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=' + topicArn + ':' + uuid(),
  });
  return sign(m);
}

function subscriptionConfirmation(version) {
  const token = crypto.randomBytes(128).toString('hex');
  return sign({
    Type: 'SubscriptionConfirmation',
    MessageId: uuid(),
    Token: token,
    TopicArn: topicArn,
    Message: 'You have chosen to subscribe to the topic ' + topicArn + '.\nTo confirm the subscription, visit the SubscribeURL included in this message.',
    SubscribeURL: 'https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=' + topicArn + '&Token=' + token,
    Timestamp: ISO,
    SignatureVersion: version,
    Signature: '',
    SigningCertURL: certURL,
  });
}

// tamperOne changes one byte of s: its first ASCII letter or digit becomes
// the next one (z -> a, 9 -> 0), so JSON stays JSON.
function tamperOne(s) {
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    let r;
    if (c >= 'a' && c <= 'z') r = c === 'z' ? 'a' : String.fromCharCode(c.charCodeAt(0) + 1);
    else if (c >= 'A' && c <= 'Z') r = c === 'Z' ? 'A' : String.fromCharCode(c.charCodeAt(0) + 1);
    else if (c >= '0' && c <= '9') r = c === '9' ? '0' : String.fromCharCode(c.charCodeAt(0) + 1);
    if (r) return s.slice(0, i) + r + s.slice(i + 1);
  }
  throw new Error('nothing to tamper with in ' + JSON.stringify(s));
}

// tamperLast changes the last ASCII letter or digit of s.
function tamperLast(s) {
  const rev = [...s].reverse().join('');
  return [...tamperOne(rev)].reverse().join('');
}

// ---- the vectors ----

const genuine = [
  ['notification-v1-subject', notification('1', 'Order 8841 paid', '{"order_id":"8841","status":"paid","amount":2000}')],
  ['notification-v2', notification('2', undefined, 'Plain text\nwith a second line, "quotes", a backslash \\ and non-ASCII: café ✓ 🚚 \u2028end')],
  ['notification-v2-subject', notification('2', 'Ünïcödé subject', '{"Records":[{"eventName":"ObjectCreated:Put","s3":{"object":{"key":"a/b.txt"}}}]}')],
  ['subscription-confirmation-v1', subscriptionConfirmation('1')],
  ['subscription-confirmation-v2', subscriptionConfirmation('2')],
];

// What each genuine vector also gets tampered in, besides Message.
const alsoTamper = {
  'notification-v1-subject': ['Subject', 'MessageId'],
  'notification-v2': ['Timestamp', 'TopicArn'],
  'notification-v2-subject': ['Subject', 'Type'],
  'subscription-confirmation-v1': ['Token', 'SubscribeURL'],
  'subscription-confirmation-v2': ['Token', 'Timestamp'],
};

const cases = []; // {name, kind, message, expect, noFetch}
for (const [name, m] of genuine) {
  cases.push({ name, kind: 'genuine', message: m, expect: true });
  for (const field of ['Message', ...alsoTamper[name]]) {
    const t = { ...m };
    t[field] = field === 'Timestamp' || field === 'TopicArn' ? tamperLast(t[field]) : field === 'Type' ? 'SubscriptionConfirmation' : tamperOne(t[field]);
    if (field === 'Type') {
      // A Notification presented as a confirmation, with the Token and
      // SubscribeURL a confirmation needs.
      t.Token = 'a'.repeat(32);
      t.SubscribeURL = 'https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=' + topicArn + '&Token=' + t.Token;
    }
    cases.push({ name: name + '/tampered-' + field, kind: 'tampered', message: t, expect: false });
  }
}

const n1 = genuine[0][1];
const c1 = genuine[3][1];
// Unsigned fields: changing them leaves the signature valid.
cases.push({ name: 'notification-v1-subject/changed-UnsubscribeURL', kind: 'unsigned-field', expect: true,
  message: { ...n1, UnsubscribeURL: n1.UnsubscribeURL.replace('Unsubscribe&', 'Unsubscribe&x=1&') } });
// Fields that are signed when present, added to a message that has none.
cases.push({ name: 'notification-v2/added-Subject', kind: 'tampered', expect: false,
  message: { ...genuine[1][1], Subject: 'added' } });
cases.push({ name: 'notification-v1-subject/removed-Subject', kind: 'tampered', expect: false,
  message: (() => { const m = { ...n1 }; delete m.Subject; return m; })() });
// Signature versions: another algorithm, an unknown version.
cases.push({ name: 'notification-v1-subject/as-v2', kind: 'tampered', expect: false, message: { ...n1, SignatureVersion: '2' } });
cases.push({ name: 'subscription-confirmation-v1/version-3', kind: 'tampered', expect: false, noFetch: true, message: { ...c1, SignatureVersion: '3' } });
// A signature of another message.
cases.push({ name: 'notification-v1-subject/signature-of-another', kind: 'tampered', expect: false,
  message: { ...n1, Signature: genuine[2][1].Signature } });
// Certificate URLs the validator refuses before any fetch.
for (const [label, u] of [
  ['http', certURL.replace('https:', 'http:')],
  ['other-host', certURL.replace('sns.us-east-1.amazonaws.com', 'sns.us-east-1.amazonaws.com.evil.example')],
  ['s3-host', certURL.replace('sns.us-east-1.amazonaws.com', 's3.amazonaws.com')],
  ['short-region', certURL.replace('sns.us-east-1.', 'sns.us.')],
  ['port', certURL.replace('amazonaws.com/', 'amazonaws.com:443/')],
  ['not-pem', certURL.replace(/\.pem$/, '.crt')],
  ['pem-then-query', certURL + '?x=1'],
]) {
  cases.push({ name: 'notification-v1-subject/cert-url-' + label, kind: 'bad-cert-url', expect: false, noFetch: true,
    message: { ...n1, SigningCertURL: u } });
}
// An allowed URL with no certificate behind it (404).
cases.push({ name: 'notification-v1-subject/cert-url-404', kind: 'unknown-cert', expect: false,
  message: { ...n1, SigningCertURL: certURL.replace('SimpleNotificationService-', 'SimpleNotificationService-0') } });

// ---- ask the validator ----

const validator = new MessageValidator(); // the default host pattern

function validate(raw) {
  return new Promise((resolve) => {
    validator.validate(raw, (err) => resolve(err ? [false, String(err.message || err)] : [true, '']));
  });
}

const vectors = [];
const failures = [];
for (const c of cases) {
  const raw = body(c.message);
  const before = fetched.length;
  const [valid, error] = await validate(raw);
  const didFetch = fetched.length > before;
  if (valid !== c.expect) {
    failures.push(`${c.name}: the validator ${valid ? 'accepted' : 'rejected'} a ${c.kind} vector (${error})`);
  }
  if (c.noFetch && didFetch) {
    failures.push(`${c.name}: the validator fetched ${fetched[fetched.length - 1]}`);
  }
  vectors.push({
    name: c.name,
    kind: c.kind,
    signatureVersion: c.message.SignatureVersion,
    headers: headers(c.message),
    body: raw,
    valid,
    ...(error ? { error } : {}),
    ...(c.noFetch ? { noFetch: true } : {}),
  });
}
if (!fetched.includes(certURL)) failures.push('the validator never fetched the certificate');

if (failures.length) {
  console.error('not written:\n  ' + failures.join('\n  '));
  process.exit(1);
}

const out = {
  comment: 'Recorded by providers/sns/testdata/validator/gen.mjs; replayed by providers/sns/validator_test.go. Do not edit by hand.',
  validator: { package: 'sns-validator', version: validatorVersion, hostPattern: 'default' },
  time: T,
  timestamp: ISO,
  topicArn,
  certURL,
  certificate: certPEM,
  vectors,
};
fs.writeFileSync(path.join(here, '..', 'validator_vectors.json'), JSON.stringify(out, null, 2) + '\n');
console.log(`wrote ${vectors.length} vectors (${vectors.filter((v) => v.valid).length} valid) with sns-validator ${validatorVersion}`);
