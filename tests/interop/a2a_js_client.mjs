#!/usr/bin/env node
// An official A2A client against a murmur door: the JavaScript half of tests/interop_js.rs.
//
// Drives the official A2A JavaScript SDK (@a2a-js/sdk, pinned in tests/interop/js/package.json,
// installed by scripts/setup_test_deps.py) against an authenticated door, as a user of that SDK
// would: bearer auth through the SDK's AuthenticationHandler, then send, stream, get, list,
// subscribe, cancel and the extended card. It prints one JSON object describing what the SDK
// saw (the shape tests/support/clients.rs checks for every client) and exits 0 when it ran to
// the end, whatever it saw; non-zero with a stack trace on anything unexpected.
//
// usage: node a2a_js_client.mjs NODE_MODULES_DIR http://localhost:PORT TOKEN

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, url, token] = process.argv.slice(2);
if (!token) {
  console.error('usage: a2a_js_client.mjs NODE_MODULES_DIR http://localhost:PORT TOKEN');
  process.exit(2);
}

// The SDK lives under target/, not beside this script: import it by its package's export map.
async function importSdk(subpath) {
  const root = join(modules, '@a2a-js', 'sdk');
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
  return import(pathToFileURL(join(root, pkg.exports[subpath].import)).href);
}
const { Role, TaskState } = await importSdk('.');
const {
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  createAuthenticatingFetchWithRetry,
} = await importSdk('./client');

/** A client whose every request (card included) goes through `fetchImpl`. */
async function clientWith(fetchImpl) {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(url);
}

/** The SDK's own bearer mechanism: an AuthenticationHandler wrapped around fetch. */
function bearer(value) {
  return createAuthenticatingFetchWithRetry(fetch, {
    headers: async () => ({ Authorization: `Bearer ${value}` }),
    shouldRetryWithHeaders: async () => undefined,
  });
}

const stateName = (s) => TaskState[s];
const texts = (parts) => parts.filter((p) => p.content?.$case === 'text').map((p) => p.content.value);

function taskSummary(task) {
  return {
    id: task.id,
    contextId: task.contextId,
    state: stateName(task.status.state),
    statusText: texts(task.status.message?.parts ?? []),
    artifacts: (task.artifacts ?? []).map((a) => ({
      artifactId: a.artifactId,
      name: a.name,
      texts: texts(a.parts),
    })),
  };
}

function eventSummary(event) {
  const { $case, value } = event.payload;
  switch ($case) {
    case 'task':
      return { kind: 'task', taskId: value.id, state: stateName(value.status.state) };
    case 'statusUpdate':
      return { kind: 'statusUpdate', taskId: value.taskId, state: stateName(value.status.state) };
    case 'artifactUpdate':
      return {
        kind: 'artifactUpdate',
        taskId: value.taskId,
        artifactId: value.artifact.artifactId,
        texts: texts(value.artifact.parts),
      };
    default:
      return { kind: $case };
  }
}

function errorSummary(e) {
  return {
    error: e.constructor.name,
    code: e.envelopeCode ?? null,
    message: e.message,
    reason: e.reason ?? null,
    data: e.data ?? null,
  };
}

async function refused(call) {
  try {
    await call();
    return 'answered';
  } catch (e) {
    return errorSummary(e);
  }
}

function message(id, text, contextId) {
  return {
    messageId: id,
    contextId: contextId ?? '',
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: text } }],
  };
}

const out = {};

// Without a token, and with one the door never minted: the door's 401 as the SDK reports it.
const anonymous = await clientWith(fetch);
out.noToken = await refused(() => anonymous.getTask({ id: 'tsk_0000000000007000800000000000000a' }));
const forged = await clientWith(bearer('mur_not-minted'));
out.badToken = await refused(() => forged.getTask({ id: 'tsk_0000000000007000800000000000000a' }));

const client = await clientWith(bearer(token));

const held = await client.sendMessage({
  message: message('js-held', 'Acknowledge message from orchestrator capsule.', 'ctx-interop'),
});
out.held = taskSummary(held);

out.streamed = [];
for await (const event of client.sendMessageStream({
  message: message('js-stream', 'Stream this task.', 'ctx-interop'),
})) {
  out.streamed.push(eventSummary(event));
}

const live = await client.sendMessage({
  message: message('js-live', '@sleep 30', 'ctx-interop'),
  configuration: { returnImmediately: true },
});
out.live = taskSummary(live);
let got;
for (let i = 0; i < 500; i++) {
  got = await client.getTask({ id: live.id });
  if (stateName(got.status.state) === 'TASK_STATE_WORKING') break;
  await new Promise((r) => setTimeout(r, 10));
}
out.got = taskSummary(got);

// listTasks({}) sends "status": "UNRECOGNIZED" (its toJSON writes an unset enum that way), which
// the door refuses as the spec says; the explicit empty request is what a user must send.
out.listBare = await refused(() => client.listTasks({}));
const page = await client.listTasks({ tenant: '', contextId: '', status: TaskState.TASK_STATE_UNSPECIFIED, pageToken: '' });
out.listed = { ids: page.tasks.map((t) => t.id), totalSize: page.totalSize };

const subscription = client.resubscribeTask({ tenant: '', id: live.id });
out.subscribed = [];
const first = await subscription.next();
out.subscribed.push(eventSummary(first.value));
out.canceled = taskSummary(await client.cancelTask({ id: live.id }));
for await (const event of subscription) {
  out.subscribed.push(eventSummary(event));
}

out.cancelAgain = await refused(() => client.cancelTask({ id: live.id }));
out.subscribeEnded = await refused(async () => {
  for await (const _ of client.resubscribeTask({ tenant: '', id: live.id })) {
    // A stream that opens is the wrong answer; its events do not matter.
  }
});
out.unknown = await refused(() => client.getTask({ id: 'tsk_0000000000007000800000000000000a' }));

const card = await client.getAgentCard();
out.extended = {
  extensions: card.capabilities.extensions.map((e) => e.uri),
  sessionId: card.capabilities.extensions[1]?.params?.sessionId ?? null,
  extendedAgentCard: card.capabilities.extendedAgentCard,
  securitySchemes: Object.keys(card.securitySchemes),
};

console.log(JSON.stringify(out));
