/**
 * The node channel's call table: every SandboxRuntime method the agent serves (`POST /v1/runtime/<method>` with
 * `{ "args": [...] }`), the exact shape of its arguments and of its result. The agent checks arguments before its
 * runtime sees them; the client checks results before the lifecycle sees them. Nothing outside this table is
 * reachable through an agent: no raw engine call, no option the API itself would not set.
 */
import { type Static, type TSchema, Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { REGISTRY_NAME_PATTERN } from '../runtime/registry/registry-settings.ts';

/** A container id or name: no slash, no dot-dot (it becomes part of an engine URL path). */
const ContainerId = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$' });
/** A sandbox id as the platform makes them (also an image tag: at most 128 characters). */
const SandboxId = Type.String({ pattern: '^[A-Za-z0-9_]{1,128}$' });
const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
/** An image reference (`[registry[:port]/]path[:tag][@digest]`) or an image id; no component before the tag can be `.`/`..` (it becomes an engine URL path). */
const ImageRef = Type.String({
  maxLength: 512,
  pattern: `^(?:(?:[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?|sha256:[a-f0-9]{64})$`,
});
/** `<kind>:<tag>` under the node's registry prefix (registry-settings.ts): a push can name nothing else. */
const RegistryName = Type.String({ maxLength: 140, pattern: REGISTRY_NAME_PATTERN });
const IPv4 = Type.String({ pattern: '^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])$' });
/** An IPv4 address with an optional prefix (as the API's network rules accept them: digits, leading zeros included). */
const Cidr = Type.String({ pattern: '^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])(?:/[0-9]{1,3})?$' });
/** An allowed domain as the API's network rules accept it (a superset: `*.` wildcard, labels of letters, digits, `-`, `_`). */
const DomainRule = Type.String({ maxLength: 253, pattern: '^(\\*\\.)?([A-Za-z0-9_-]+\\.)*[A-Za-z0-9_-]+$' });
/** An absolute path with no `.`/`..` components and no NUL. */
const AbsolutePath = Type.String({ maxLength: 4096, pattern: '^(?:/(?!\\.\\.?(?:/|$))[^/\\x00]+)+$' });

/** An IPv6 address with an optional prefix (characters only: the firewall parses it before any rule is made). */
const Cidr6 = Type.String({ maxLength: 49, pattern: '^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(?:/[0-9]{1,3})?$' });
/** Header transforms per domain (network.rules; placeholders unresolved: secrets are resolved where the proxy runs). */
const Transforms = Type.Record(
  DomainRule,
  Type.Array(
    Type.Object(
      { transform: Type.Optional(Type.Object({ headers: Type.Optional(Type.Record(Type.String({ maxLength: 128 }), Type.String({ maxLength: 8192 }))) }, { additionalProperties: false })) },
      { additionalProperties: false },
    ),
    { maxItems: 16 },
  ),
  // A record's key schema is a pattern of its properties only: other keys are refused here, not let through.
  { additionalProperties: false },
);
/** The sandbox owner's own egress proxy, its password opened (the channel is mutual TLS). */
const Upstream = Type.Object(
  {
    protocol: Type.Union([Type.Literal('socks5'), Type.Literal('http')]),
    host: Type.String({ minLength: 1, maxLength: 253, pattern: '^[A-Za-z0-9_.:\\[\\]-]+$' }),
    port: Type.Integer({ minimum: 1, maximum: 65535 }),
    username: Type.Optional(Type.String({ maxLength: 255 })),
    password: Type.Optional(Type.String({ maxLength: 255 })),
  },
  { additionalProperties: false },
);

const EgressPolicy = Type.Object(
  {
    allow: Type.Array(Type.Union([Cidr, Cidr6]), { maxItems: 4096 }),
    deny: Type.Array(Type.Union([Cidr, Cidr6]), { maxItems: 4096 }),
    domains: Type.Optional(Type.Array(DomainRule, { maxItems: 4096 })),
    transforms: Type.Optional(Transforms),
    upstream: Type.Optional(Upstream),
  },
  { additionalProperties: false },
);

const ContainerSpec = Type.Object(
  {
    sandboxId: SandboxId,
    templateId: Type.String({ pattern: '^[A-Za-z0-9_./:-]{1,256}$' }),
    image: ImageRef,
    cpuCount: Type.Number({ exclusiveMinimum: 0, maximum: 1024 }),
    memoryMB: Type.Integer({ minimum: 6, maximum: 4 * 1024 * 1024 }),
    egress: Type.Optional(EgressPolicy),
    envdAccessToken: Type.String({ minLength: 1, maxLength: 512, pattern: '^[\\x21-\\x7e]+$' }),
    envdVersion: Type.Optional(Type.String({ pattern: '^[0-9A-Za-z.+-]{1,64}$' })),
    directories: Type.Optional(Type.Array(Type.Object({ source: AbsolutePath, target: AbsolutePath }, { additionalProperties: false }), { maxItems: 64 })),
    pool: Type.Optional(Type.String({ maxLength: 256, pattern: '^[^\\x00-\\x1f]*$' })),
  },
  { additionalProperties: false },
);

/**
 * envd's `/init` for one sandbox as a bootContainer call carries it (the token is the spec's own: none travels here).
 * Bounded like a create's environment (sandbox-schemas.ts: 256 names, values below 128 KiB) with room for the
 * template's and the egress CA's variables.
 */
export const MAX_INIT_ENV_VARS = 1024;
const EnvdInitShape = Type.Object(
  {
    envVars: Type.Record(Type.String({ pattern: '^[^=\\x00]{1,256}$' }), Type.String({ maxLength: 131_072, pattern: '^[^\\x00]*$' }), { maxProperties: MAX_INIT_ENV_VARS, additionalProperties: false }),
    defaultUser: Type.String({ maxLength: 256, pattern: '^[^\\x00-\\x1f]*$' }),
    defaultWorkdir: Type.String({ maxLength: 4096, pattern: '^[^\\x00-\\x1f]*$' }),
  },
  { additionalProperties: false },
);

const Labels = Type.Record(Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z0-9][A-Za-z0-9_.\\-/]*$' }), Type.String({ maxLength: 4096 }), { maxProperties: 64, additionalProperties: false });
const Status = Type.Union([Type.Literal('running'), Type.Literal('paused'), Type.Literal('stopped'), Type.Literal('missing')]);
const OptionalAddress = Type.Union([IPv4, Type.Null()]);

/** One entry of the table: argument tuple and result schemas (results travel as JSON; `undefined` as null). */
interface MethodSpec {
  args: TSchema;
  result: TSchema;
}

const Void = Type.Null();

export const RUNTIME_METHODS = {
  prepare: { args: Type.Tuple([]), result: Void },
  imageExists: { args: Type.Tuple([ImageRef]), result: Type.Boolean() },
  imageEnvdVersion: { args: Type.Tuple([ImageRef]), result: Type.Union([Type.String({ maxLength: 64 }), Type.Null()]) },
  startContainer: {
    args: Type.Tuple([ContainerSpec]),
    // The agent waits for the egress rules (and envd's token) before it answers: `egressError` says they failed.
    result: Type.Object({ containerId: ContainerId, address: IPv4, egressError: Type.Optional(Type.String({ maxLength: 8192 })) }, { additionalProperties: false }),
  },
  // Protocol version 2: the container started and made ready on the node (envd waited for there, `/init` sent there
  // with the spec's token); on failure the node removed it. The API's one call for a boot.
  bootContainer: {
    args: Type.Tuple([ContainerSpec, EnvdInitShape]),
    result: Type.Object({ containerId: ContainerId, address: IPv4, envdVersion: Type.String({ maxLength: 64 }) }, { additionalProperties: false }),
  },
  pause: { args: Type.Tuple([ContainerId]), result: Void },
  unpause: { args: Type.Tuple([ContainerId]), result: Void },
  commitSandbox: { args: Type.Tuple([ContainerId, SandboxId]), result: ImageRef },
  commit: { args: Type.Union([Type.Tuple([ContainerId, ImageRef]), Type.Tuple([ContainerId, ImageRef, Labels])]), result: ImageRef },
  tagImage: { args: Type.Tuple([ImageRef, ImageRef]), result: Void },
  remove: { args: Type.Tuple([ContainerId]), result: Void },
  removeImage: { args: Type.Tuple([ImageRef]), result: Void },
  claimSandboxImage: { args: Type.Tuple([ImageRef, SandboxId]), result: ImageRef },
  removeSandboxImage: { args: Type.Tuple([SandboxId]), result: Void },
  inspect: { args: Type.Tuple([ContainerId]), result: Type.Object({ status: Status, address: OptionalAddress }, { additionalProperties: false }) },
  listManaged: {
    args: Type.Tuple([]),
    result: Type.Array(
      Type.Object(
        { containerId: ContainerId, sandboxId: Type.String({ maxLength: 256 }), status: Status, address: OptionalAddress, unclaimed: Type.Boolean(), pooled: Type.Optional(Type.Boolean()) },
        { additionalProperties: false },
      ),
      { maxItems: 100_000 },
    ),
  },
  listSandboxImages: { args: Type.Tuple([]), result: Type.Array(Type.Object({ image: ImageRef, sandboxId: SandboxId }, { additionalProperties: false }), { maxItems: 100_000 }) },
  applyEgress: { args: Type.Tuple([SandboxId, IPv4, EgressPolicy]), result: Void },
  // What the node's egress proxy and tunnel can apply (agents from version 2 on; an older agent refuses the call).
  egressTransformsAvailable: { args: Type.Tuple([]), result: Type.Boolean() },
  egressUpstreamProblem: { args: Type.Tuple([]), result: Type.Union([Type.String({ maxLength: 4096 }), Type.Null()]) },
  // The node's own registry credentials are used; none travel in a call. A pull outside the prefix is refused by the node.
  pushImage: { args: Type.Tuple([ImageRef, RegistryName]), result: ImageRef },
  pullImage: { args: Type.Tuple([ImageRef]), result: Void },
} satisfies Record<string, MethodSpec>;

export type RuntimeMethodName = keyof typeof RUNTIME_METHODS;

/** The argument tuple of the event stream (`POST /v1/runtime/watchEvents`): the engine time to replay from, or null. */
export const WatchEventsArgs = Type.Tuple([Type.Union([Type.Number({ minimum: 0 }), Type.Null()])]);

/** One line of the event stream. */
export const EngineEventLine = Type.Object(
  {
    kind: Type.Union([Type.Literal('died'), Type.Literal('oom')]),
    containerId: ContainerId,
    sandboxId: Type.String({ maxLength: 256 }),
    exitCode: Type.Union([Type.Integer(), Type.Null()]),
    time: Type.Number({ minimum: 0 }),
  },
  { additionalProperties: false },
);

export const NodeCapacityShape = Type.Object(
  {
    cpuCount: Type.Number({ minimum: 0 }),
    memoryMB: Type.Integer({ minimum: 0 }),
    memoryAvailableMB: Type.Integer({ minimum: 0 }),
    images: Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 10_000 })),
    poolReady: Type.Optional(Type.Record(Type.String({ maxLength: 256 }), Type.Integer({ minimum: 0 }))),
  },
  { additionalProperties: false },
);

export function isRuntimeMethod(name: string): name is RuntimeMethodName {
  return Object.hasOwn(RUNTIME_METHODS, name);
}

/** What is wrong with `value` against `schema`, in a line (first few problems), or undefined when it fits. */
export function schemaProblem(schema: TSchema, value: unknown): string | undefined {
  if (Value.Check(schema, value)) return undefined;
  const problems = [...Value.Errors(schema, value)].slice(0, 3).map((e) => `${e.path || '(whole)'}: ${e.message}`);
  return problems.join('; ') || 'does not match';
}

export type WireEngineEvent = Static<typeof EngineEventLine>;

/** A volume id as the catalog makes them (it becomes a directory name on the node). */
export const VolumeId = Type.String({ pattern: '^vol_[a-z0-9]{20}$' });

/** The volume calls an agent serves (`POST /v1/volumes/<method>` with `{ "args": [volumeID] }`), on its own volumes directory. */
export const VOLUME_METHODS = {
  create: { args: Type.Tuple([VolumeId]), result: Void },
  remove: { args: Type.Tuple([VolumeId]), result: Void },
  hostDir: { args: Type.Tuple([VolumeId]), result: AbsolutePath },
} satisfies Record<string, MethodSpec>;

export type VolumeMethodName = keyof typeof VOLUME_METHODS;

export function isVolumeMethod(name: string): name is VolumeMethodName {
  return Object.hasOwn(VOLUME_METHODS, name);
}

/** The content operations a forwarded volume-content request may name (`/v1/volumecontent/<volumeID>/<op>`). */
export const VOLUME_CONTENT_OPS = ['dir', 'path', 'file'] as const;
