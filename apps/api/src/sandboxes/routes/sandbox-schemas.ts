import { Type } from '@sinclair/typebox';

/**
 * Bounds on what a sandbox request may carry, so oversized or malformed input gets a 400 before any
 * container is made. Unknown keys stay accepted everywhere: the SDK sends fields (`mcp`, `iam`, ...)
 * this platform does not use.
 */
export const LIMITS = {
  /** Metadata: a label set, not a store (the reference caps secrets' metadata lower still: 32/128/1024). */
  metadataKeys: 64,
  metadataKeyLength: 256,
  metadataValueLength: 4096,
  /** Environment variables: POSIX names; a value below Linux's MAX_ARG_STRLEN (128 KiB). */
  envVars: 256,
  envNameLength: 256,
  envValueLength: 131_072,
  /** Egress rules: entries are CIDRs, IPs or domain names (≤ 253 characters). */
  networkEntries: 1000,
  networkEntryLength: 256,
  hostLength: 256,
  templateRefLength: 512,
  volumeMounts: 64,
  httpsPorts: 100,
  sandboxIdLength: 256,
} as const;

const Metadata = Type.Object(
  {},
  {
    additionalProperties: Type.String({ maxLength: LIMITS.metadataValueLength }),
    maxProperties: LIMITS.metadataKeys,
    propertyNames: { minLength: 1, maxLength: LIMITS.metadataKeyLength },
  },
);

const EnvVars = Type.Object(
  {},
  {
    // No NUL: it cannot be passed in a process environment.
    additionalProperties: Type.String({ maxLength: LIMITS.envValueLength, pattern: '^[^\\u0000]*$' }),
    maxProperties: LIMITS.envVars,
    propertyNames: { pattern: '^[A-Za-z_][A-Za-z0-9_]*$', maxLength: LIMITS.envNameLength },
  },
);

const RuleList = Type.Array(Type.String({ maxLength: LIMITS.networkEntryLength }), { maxItems: LIMITS.networkEntries });

export const NetworkSchema = Type.Object(
  {
    allowPublicTraffic: Type.Optional(Type.Boolean()),
    allowOut: Type.Optional(RuleList),
    denyOut: Type.Optional(RuleList),
    maskRequestHost: Type.Optional(Type.String({ maxLength: LIMITS.hostLength })),
    httpsPorts: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { maxItems: LIMITS.httpsPorts })),
    egressProxy: Type.Optional(Type.Unknown()),
    rules: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: true },
);

/** `PUT /sandboxes/{id}/network` (SandboxNetworkUpdateConfig); a set `rules` is refused (not supported). */
export const NetworkUpdateSchema = Type.Object(
  {
    allowOut: Type.Optional(RuleList),
    denyOut: Type.Optional(RuleList),
    allow_internet_access: Type.Optional(Type.Boolean()),
    egressProxy: Type.Optional(Type.Unknown()),
    rules: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: true },
);

export const NewSandboxSchema = Type.Object(
  {
    templateID: Type.String({ minLength: 1, maxLength: LIMITS.templateRefLength }),
    timeout: Type.Optional(Type.Integer()),
    autoPause: Type.Optional(Type.Boolean()),
    autoPauseMemory: Type.Optional(Type.Boolean()),
    autoResume: Type.Optional(Type.Object({ enabled: Type.Boolean() })),
    secure: Type.Optional(Type.Boolean()),
    allow_internet_access: Type.Optional(Type.Boolean()),
    network: Type.Optional(NetworkSchema),
    metadata: Type.Optional(Metadata),
    envVars: Type.Optional(EnvVars),
    mcp: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()])),
    volumeMounts: Type.Optional(
      Type.Array(Type.Object({ name: Type.String({ maxLength: LIMITS.hostLength }), path: Type.String({ maxLength: 4096 }) }), { maxItems: LIMITS.volumeMounts }),
    ),
  },
  { additionalProperties: true },
);

export const SandboxParams = Type.Object({ sandboxID: Type.String({ minLength: 1, maxLength: LIMITS.sandboxIdLength }) });
export const TimeoutBody = Type.Object({ timeout: Type.Integer() }, { additionalProperties: true });
export const OptionalTimeoutBody = Type.Object({ timeout: Type.Optional(Type.Integer()), autoPause: Type.Optional(Type.Boolean()), memory: Type.Optional(Type.Boolean()) }, { additionalProperties: true });
export const RefreshBody = Type.Object({ duration: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })) }, { additionalProperties: true });
export const PauseBody = Type.Object({ memory: Type.Optional(Type.Boolean()) }, { additionalProperties: true });

export const ListQuery = Type.Object(
  {
    metadata: Type.Optional(Type.String({ maxLength: 65_536 })),
    state: Type.Optional(Type.Union([Type.String({ maxLength: 256 }), Type.Array(Type.String({ maxLength: 256 }), { maxItems: 16 })])),
    template: Type.Optional(Type.String({ maxLength: LIMITS.templateRefLength })),
    startedAfter: Type.Optional(Type.String({ maxLength: 64 })),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
    nextToken: Type.Optional(Type.String({ maxLength: 1024 })),
  },
  { additionalProperties: true },
);
