// Drives `lmcp serve --profile full` with the official TypeScript MCP SDK clients:
//   sdk1        @modelcontextprotocol/sdk 1.x Client, protocol 2025-11-25 (initialize handshake)
//   v2-legacy   @modelcontextprotocol/client 2.x, versionNegotiation 'legacy' (2025-11-25)
//   v2-modern   @modelcontextprotocol/client 2.x, versionNegotiation pinned to 2026-07-28
// each with LMCP_OUTPUT_SCHEMAS unset and set to 1, all over stdio.
//
// Usage: LMCP=/path/to/lmcp LMCP_HOME=/empty/tmp/dir node scenarios.mjs [--keep-going]
// Prints "<client> <schemas> <scenario> ok" per scenario; exits non-zero on the first failure
// (with --keep-going: runs everything, lists the failures, then exits non-zero).
// Every server gets a fresh LMCP_HOME: a new subfolder of $LMCP_HOME.

import { mkdtempSync, mkdirSync, existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { isDeepStrictEqual, inspect } from 'node:util';

import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport as Stdio1 } from '@modelcontextprotocol/sdk/client/stdio.js';
import {
    ElicitRequestSchema,
    LATEST_PROTOCOL_VERSION as SDK1_LATEST,
    ToolListChangedNotificationSchema
} from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { Client as Client2 } from '@modelcontextprotocol/client';
import { StdioClientTransport as Stdio2 } from '@modelcontextprotocol/client/stdio';

const LMCP = process.env.LMCP?.includes('/') ? resolve(process.env.LMCP) : process.env.LMCP;
const ROOT = process.env.LMCP_HOME;
const KEEP_GOING = process.argv.includes('--keep-going');
if (!LMCP || !ROOT) {
    console.error('usage: LMCP=<lmcp binary> LMCP_HOME=<empty temp dir> node scenarios.mjs [--keep-going]');
    process.exit(2);
}
if (!existsSync(LMCP)) {
    console.error(`LMCP=${LMCP}: no such file`);
    process.exit(2);
}
mkdirSync(ROOT, { recursive: true });

const MODERN = '2026-07-28';
const LEGACY = '2025-11-25';
const SCENARIO_TIMEOUT_MS = 60_000;
const ajv = new AjvJsonSchemaValidator();

class Failure extends Error {}
function check(cond, what) {
    if (!cond) throw new Failure(what);
}
const show = v => inspect(v, { depth: 6, breakLength: 160 });
const text = r => (r.content ?? []).filter(c => c.type === 'text').map(c => c.text).join('\n');

// ---------------------------------------------------------------------------------------------
// Clients

const CLIENTS = [
    { name: 'sdk1', era: LEGACY, sdk: 1 },
    { name: 'v2-legacy', era: LEGACY, sdk: 2, negotiation: { mode: 'legacy' } },
    { name: 'v2-modern', era: MODERN, sdk: 2, negotiation: { mode: { pin: MODERN } } }
];

/** Starts a server with a fresh home and connects a client of this kind; `elicit`: 'accept' | 'decline' | undefined. */
async function connect(kind, schemas, { elicit, onToolsChanged } = {}) {
    const home = mkdtempSync(join(ROOT, 'home-'));
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LMCP_HOME: home };
    if (schemas) env.LMCP_OUTPUT_SCHEMAS = '1';
    const params = { command: LMCP, args: ['serve', '--profile', 'full'], env, stderr: 'pipe' };
    const info = { name: `lmcp-interop-${kind.name}`, version: '0.0.0' };
    const capabilities = elicit ? { elicitation: { form: {} } } : {};
    const asked = [];
    const answer = request => {
        asked.push(request.params);
        return elicit === 'accept' ? { action: 'accept', content: { allow: true } } : { action: 'decline' };
    };
    let client, transport;
    if (kind.sdk === 1) {
        transport = new Stdio1(params);
        client = new Client1(info, { capabilities });
        if (elicit) client.setRequestHandler(ElicitRequestSchema, answer);
        if (onToolsChanged) client.setNotificationHandler(ToolListChangedNotificationSchema, onToolsChanged);
    } else {
        transport = new Stdio2(params);
        client = new Client2(info, { capabilities, versionNegotiation: kind.negotiation });
        if (elicit) client.setRequestHandler('elicitation/create', answer);
        if (onToolsChanged) client.setNotificationHandler('notifications/tools/list_changed', onToolsChanged);
    }
    let stderr = '';
    transport.stderr?.on('data', d => {
        stderr = (stderr + d.toString()).slice(-4000);
    });
    // SDK 1.x tells the transport the version the server answered (setProtocolVersion is an
    // optional transport hook its stdio transport lacks): record it there.
    let answered;
    if (kind.sdk === 1) transport.setProtocolVersion = v => (answered = v);
    try {
        await client.connect(transport);
    } catch (e) {
        await client.close().catch(() => {});
        throw withStderr(new Failure(`connect: ${e?.name}: ${e?.message ?? e}`), stderr);
    }
    const version = kind.sdk === 1 ? answered : client.getNegotiatedProtocolVersion();
    return { client, home, asked, version, stderr: () => stderr, close: () => client.close().catch(() => {}) };
}

/** Adds the tail of the server's stderr to an error's message. */
function withStderr(e, stderr) {
    const tail = stderr.trim();
    if (tail && e instanceof Error) e.message += `\n  server stderr (tail):\n    ${tail.split('\n').slice(-8).join('\n    ')}`;
    return e;
}

/** Runs `body` with a connected client, always closing it. */
async function withClient(kind, schemas, opts, body) {
    const c = await connect(kind, schemas, opts);
    try {
        return await body(c);
    } catch (e) {
        throw withStderr(e, c.stderr());
    } finally {
        await c.close();
    }
}

/** Calls a tool; a client-side exception becomes a Failure that says what the client rejected. */
async function call(client, name, args) {
    try {
        return await client.callTool({ name, arguments: args });
    } catch (e) {
        throw new Failure(`${name} ${JSON.stringify(args)}: the client threw instead of returning a result: ${e?.message ?? e}`);
    }
}

/** The tools listed, by name (listing also primes the clients' output-schema validators). */
async function tools(client) {
    const { tools } = await client.listTools();
    return new Map(tools.map(t => [t.name, t]));
}

/** With schemas on: the structured content of a successful result meets the tool's declared outputSchema. */
function meetsSchema(tool, result, what) {
    check(tool.outputSchema, `${what}: ${tool.name} lists no outputSchema with LMCP_OUTPUT_SCHEMAS=1`);
    check(result.structuredContent !== undefined, `${what}: no structuredContent: ${show(result)}`);
    const v = ajv.getValidator(tool.outputSchema)(result.structuredContent);
    check(v.valid, `${what}: structuredContent does not meet ${tool.name}'s outputSchema: ${v.errorMessage}\n  ${show(result.structuredContent)}`);
}

/** An error result: isError, the real message in the text, and no structured content that breaks the schema. */
function isErrorWith(listed, name, r, needles, schemas) {
    check(r.isError === true, `${name}: expected an isError result, got ${show(r)}`);
    const t = text(r);
    check(needles.some(n => t.includes(n)), `${name}: the error text should contain ${needles.map(n => JSON.stringify(n)).join(' or ')}: ${JSON.stringify(t)}`);
    const tool = listed.get(name);
    if (schemas && tool?.outputSchema && r.structuredContent !== undefined) {
        const v = ajv.getValidator(tool.outputSchema)(r.structuredContent);
        check(v.valid, `${name}: the error result's structuredContent ${JSON.stringify(r.structuredContent)} does not meet the declared outputSchema (${v.errorMessage}); SDK 1.x clients reject such results`);
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios: each (kind, schemas) → throws on failure

async function handshake(kind, schemas) {
    await withClient(kind, schemas, {}, async ({ client, version }) => {
        check(version === kind.era, `negotiated protocol ${version}, wanted ${kind.era}`);
        if (kind.sdk === 2) {
            const era = kind.era === MODERN ? 'modern' : 'legacy';
            check(client.getProtocolEra() === era, `protocol era ${client.getProtocolEra()}, wanted ${era}`);
        }
        check(client.getServerVersion()?.name === 'lmcp', `server info: ${show(client.getServerVersion())}`);
        check(client.getServerCapabilities()?.tools?.listChanged === true, `tools.listChanged capability: ${show(client.getServerCapabilities())}`);
    });
}

async function list(kind, schemas) {
    await withClient(kind, schemas, {}, async ({ client }) => {
        const { tools } = await client.listTools();
        const names = tools.map(t => t.name);
        check(isDeepStrictEqual(names, [...names].sort()), `tools not sorted by name: ${names.join(', ')}`);
        check(new Set(names).size === names.length, `duplicate names: ${names.join(', ')}`);
        for (const n of ['calculate', 'read_file', 'write_file', 'custom_tool_create']) check(names.includes(n), `${n} not listed: ${names.join(', ')}`);
        const by = new Map(tools.map(t => [t.name, t]));
        const calc = by.get('calculate');
        check(calc.annotations?.readOnlyHint === true, `calculate readOnlyHint: ${show(calc.annotations)}`);
        check(calc.annotations?.destructiveHint !== true, `calculate destructiveHint: ${show(calc.annotations)}`);
        check(calc.inputSchema?.type === 'object' && calc.inputSchema.required?.includes('expression'), `calculate inputSchema: ${show(calc.inputSchema)}`);
        const write = by.get('write_file');
        check(write.annotations?.destructiveHint === true, `write_file destructiveHint: ${show(write.annotations)}`);
        check(write.annotations?.readOnlyHint !== true, `write_file readOnlyHint: ${show(write.annotations)}`);
        if (schemas) {
            const withSchema = tools.filter(t => t.outputSchema);
            check(calc.outputSchema, 'calculate lists no outputSchema with LMCP_OUTPUT_SCHEMAS=1');
            for (const t of withSchema) {
                check(t.outputSchema.type === 'object', `${t.name} outputSchema is not an object schema: ${show(t.outputSchema)}`);
                try {
                    ajv.getValidator(t.outputSchema);
                } catch (e) {
                    throw new Failure(`${t.name} outputSchema does not compile: ${e.message}`);
                }
            }
        } else {
            const withSchema = tools.filter(t => t.outputSchema).map(t => t.name);
            check(withSchema.length === 0, `output schemas listed without LMCP_OUTPUT_SCHEMAS: ${withSchema.join(', ')}`);
        }
    });
}

async function callCalculate(kind, schemas) {
    await withClient(kind, schemas, {}, async ({ client }) => {
        const listed = await tools(client);
        const r = await call(client, 'calculate', { expression: '6*7' });
        check(!r.isError, `calculate 6*7 is an error: ${show(r)}`);
        check(isDeepStrictEqual(r.structuredContent, { expression: '6*7', value: 42 }), `calculate 6*7 structuredContent: ${show(r.structuredContent)}`);
        check(text(r).includes('42'), `calculate 6*7 text: ${text(r)}`);
        if (schemas) meetsSchema(listed.get('calculate'), r, 'calculate 6*7');
    });
}

async function errorResults(kind, schemas) {
    await withClient(kind, schemas, { elicit: 'decline' }, async ({ client, home, asked }) => {
        const listed = await tools(client);
        let r = await call(client, 'calculate', { expression: '1/0' });
        isErrorWith(listed, 'calculate', r, ['division by zero'], schemas);
        const missing = 'no-such-file-17.txt';
        r = await call(client, 'read_file', { path: missing });
        isErrorWith(listed, 'read_file', r, [missing, 'not found'], schemas);
        const target = 'declined-17.txt';
        r = await call(client, 'write_file', { path: target, content: 'must not be written' });
        isErrorWith(listed, 'write_file', r, ['declined'], schemas);
        check(asked.length === 1, `write_file should ask exactly once, asked ${asked.length} times`);
        check(!existsSync(join(home, 'data', 'workspace', target)), 'declined, yet the file was written');
    });
}

async function elicitationAccepted(kind, schemas) {
    await withClient(kind, schemas, { elicit: 'accept' }, async ({ client, home, asked }) => {
        const listed = await tools(client);
        const target = 'accepted-17.txt';
        const r = await call(client, 'write_file', { path: target, content: 'asked first' });
        check(!r.isError, `write_file accepted is an error: ${show(r)}`);
        check(asked.length === 1, `write_file should ask exactly once, asked ${asked.length} times`);
        check(JSON.stringify(asked[0]).includes('write_file'), `the question names the tool: ${show(asked[0])}`);
        const file = join(home, 'data', 'workspace', target);
        check(existsSync(file), `accepted, but ${file} does not exist`);
        check(readFileSync(file, 'utf8') === 'asked first', `accepted, wrong content: ${JSON.stringify(readFileSync(file, 'utf8'))}`);
        if (schemas && listed.get('write_file')?.outputSchema) meetsSchema(listed.get('write_file'), r, 'write_file');
    });
}

const USER_DOUBLE = {
    name: 'user_double',
    description: 'Double a number',
    parameters: [{ name: 'n', type: 'string', required: true }],
    steps: [{ id: 'calc', tool: 'calculate', arguments: { expression: { $input: 'n' } } }]
};

async function listChanged(kind, schemas) {
    let changes = 0;
    const onToolsChanged = () => {
        changes += 1;
    };
    await withClient(kind, schemas, { onToolsChanged }, async ({ client }) => {
        await tools(client);
        let sub;
        if (kind.era === MODERN) {
            // 2026-07-28: change notifications ride a subscriptions/listen stream.
            sub = await client.listen({ toolsListChanged: true });
            check(sub.honoredFilter?.toolsListChanged === true, `listen honored filter: ${show(sub.honoredFilter)}`);
        }
        try {
            const r = await call(client, 'custom_tool_create', USER_DOUBLE);
            check(!r.isError, `custom_tool_create: ${show(r)}`);
            await new Promise(res => setTimeout(res, 3000));
            check(changes === 1, `expected exactly one tools/list_changed within 3 s of custom_tool_create, got ${changes}`);
        } finally {
            await sub?.close();
        }
        const { tools: after } = await client.listTools(undefined, kind.sdk === 2 ? { cacheMode: 'refresh' } : undefined);
        const tool = after.find(t => t.name === 'user_double');
        check(tool, `user_double not listed after creation: ${after.map(t => t.name).join(', ')}`);
        check(isDeepStrictEqual(after.map(t => t.name), after.map(t => t.name).sort()), 'tools not sorted after creation');
        const r = await call(client, 'user_double', { n: '21*2' });
        check(!r.isError, `user_double: ${show(r)}`);
        check(r.structuredContent?.result?.value === 42, `user_double 21*2: ${show(r.structuredContent)}`);
        if (schemas && tool.outputSchema) meetsSchema(tool, r, 'user_double');
    });
}

async function resultsMeetSchemas(kind, schemas) {
    await withClient(kind, schemas, {}, async ({ client }) => {
        const listed = await tools(client);
        const calls = [
            ['get_datetime', {}],
            ['calculate', { expression: '2^10' }],
            ['list_dir', {}],
            ['workspace_list', {}]
        ];
        for (const [name, args] of calls) {
            check(listed.has(name), `${name} not listed`);
            const r = await call(client, name, args);
            check(!r.isError, `${name} ${JSON.stringify(args)} is an error: ${text(r)}`);
            check(r.structuredContent && typeof r.structuredContent === 'object', `${name}: no structuredContent: ${show(r)}`);
            // A tool that declares no outputSchema has nothing to meet; the clients validate the rest.
            if (schemas && listed.get(name).outputSchema) meetsSchema(listed.get(name), r, name);
        }
    });
}

const SCENARIOS = [
    ['handshake', handshake],
    ['list', list],
    ['call', callCalculate],
    ['error results', errorResults],
    ['elicitation accepted', elicitationAccepted],
    ['list_changed', listChanged],
    ['results meet schemas', resultsMeetSchemas]
];

// ---------------------------------------------------------------------------------------------

function timeout(ms, what) {
    let t;
    const p = new Promise((_, rej) => {
        t = setTimeout(() => rej(new Failure(`${what}: timed out after ${ms / 1000} s`)), ms);
    });
    return { p, clear: () => clearTimeout(t) };
}

const failures = [];
let passed = 0;
console.log(`sdk 1.x latest protocol ${SDK1_LATEST}; lmcp ${LMCP}`);
for (const kind of CLIENTS) {
    for (const schemas of [false, true]) {
        const label = `${kind.name} ${kind.era} schemas=${schemas ? 'on' : 'off'}`;
        for (const [name, run] of SCENARIOS) {
            const to = timeout(SCENARIO_TIMEOUT_MS, `${label} ${name}`);
            try {
                await Promise.race([run(kind, schemas), to.p]);
                console.log(`${label} ${name} ok`);
                passed += 1;
            } catch (e) {
                const msg = `${label} ${name} FAILED: ${e instanceof Failure ? e.message : `${e?.name}: ${e?.message ?? e}`}`;
                console.log(msg);
                failures.push(msg);
                if (!KEEP_GOING) {
                    console.error(`\n${msg}`);
                    process.exit(1);
                }
            } finally {
                to.clear();
            }
        }
    }
}
console.log(`${passed} passed, ${failures.length} failed`);
if (failures.length) {
    console.error(`\n${failures.length} scenario(s) failed:\n${failures.join('\n')}`);
    process.exit(1);
}
process.exit(0);
