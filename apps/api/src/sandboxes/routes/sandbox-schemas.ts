import { Type } from '@sinclair/typebox';

const StringMap = Type.Record(Type.String(), Type.String());

export const NetworkSchema = Type.Object(
  {
    allowPublicTraffic: Type.Optional(Type.Boolean()),
    allowOut: Type.Optional(Type.Array(Type.String())),
    denyOut: Type.Optional(Type.Array(Type.String())),
    maskRequestHost: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);

/** `PUT /sandboxes/{id}/network` (SandboxNetworkUpdateConfig); `egressProxy` and `rules` are accepted and ignored. */
export const NetworkUpdateSchema = Type.Object(
  {
    allowOut: Type.Optional(Type.Array(Type.String())),
    denyOut: Type.Optional(Type.Array(Type.String())),
    allow_internet_access: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true },
);

export const NewSandboxSchema = Type.Object(
  {
    templateID: Type.String({ minLength: 1 }),
    timeout: Type.Optional(Type.Integer()),
    autoPause: Type.Optional(Type.Boolean()),
    autoPauseMemory: Type.Optional(Type.Boolean()),
    autoResume: Type.Optional(Type.Object({ enabled: Type.Boolean() })),
    secure: Type.Optional(Type.Boolean()),
    allow_internet_access: Type.Optional(Type.Boolean()),
    network: Type.Optional(NetworkSchema),
    metadata: Type.Optional(StringMap),
    envVars: Type.Optional(StringMap),
    mcp: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()])),
    volumeMounts: Type.Optional(Type.Array(Type.Object({ name: Type.String(), path: Type.String() }))),
  },
  { additionalProperties: true },
);

export const SandboxParams = Type.Object({ sandboxID: Type.String({ minLength: 1 }) });
export const TimeoutBody = Type.Object({ timeout: Type.Integer() }, { additionalProperties: true });
export const OptionalTimeoutBody = Type.Object({ timeout: Type.Optional(Type.Integer()), autoPause: Type.Optional(Type.Boolean()), memory: Type.Optional(Type.Boolean()) }, { additionalProperties: true });
export const RefreshBody = Type.Object({ duration: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })) }, { additionalProperties: true });
export const PauseBody = Type.Object({ memory: Type.Optional(Type.Boolean()) }, { additionalProperties: true });

export const ListQuery = Type.Object(
  {
    metadata: Type.Optional(Type.String()),
    state: Type.Optional(Type.Union([Type.String(), Type.Array(Type.String())])),
    template: Type.Optional(Type.String()),
    startedAfter: Type.Optional(Type.String()),
    order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
    nextToken: Type.Optional(Type.String()),
  },
  { additionalProperties: true },
);
