import { Type } from '@sinclair/typebox';

const CpuCount = Type.Integer({ minimum: 1, maximum: 64 });
const MemoryMB = Type.Integer({ minimum: 128, maximum: 262_144 });
const Name = Type.String({ minLength: 1, maxLength: 300 });
const TeamId = Type.String({ maxLength: 128 });
/** Commands of a build (start, ready): generous, but bounded before they reach the builder. */
const Command = Type.String({ maxLength: 100_000 });

export const TemplateParams = Type.Object({ templateID: Type.String({ minLength: 1, maxLength: 300 }) });
export const BuildParams = Type.Object({ templateID: Type.String({ minLength: 1, maxLength: 300 }), buildID: Type.String({ minLength: 1, maxLength: 64 }) });
export const FileParams = Type.Object({ templateID: Type.String({ minLength: 1, maxLength: 300 }), hash: Type.String({ minLength: 1, maxLength: 128 }) });
export const AliasParams = Type.Object({ alias: Name });

export const RegisterV2Body = Type.Object(
  { alias: Name, teamID: Type.Optional(TeamId), cpuCount: Type.Optional(CpuCount), memoryMB: Type.Optional(MemoryMB) },
  { additionalProperties: true },
);

export const RegisterV3Body = Type.Object(
  {
    name: Type.Optional(Name),
    alias: Type.Optional(Name),
    tags: Type.Optional(Type.Array(Type.String({ maxLength: 128 }), { maxItems: 50 })),
    teamID: Type.Optional(TeamId),
    cpuCount: Type.Optional(CpuCount),
    memoryMB: Type.Optional(MemoryMB),
    minFreeDiskMb: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { additionalProperties: true },
);

const Step = Type.Object(
  {
    type: Type.String({ maxLength: 32 }),
    args: Type.Optional(Type.Array(Type.String(), { maxItems: 10_000 })),
    filesHash: Type.Optional(Type.String({ maxLength: 128 })),
    force: Type.Optional(Type.Boolean()),
    forceUpload: Type.Optional(Type.Boolean()),
    resolveSymlinks: Type.Optional(Type.Boolean()),
    gzip: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: true },
);

export const BuildStartBody = Type.Object(
  {
    fromImage: Type.Optional(Type.String({ maxLength: 512 })),
    fromTemplate: Type.Optional(Type.String({ maxLength: 300 })),
    fromImageRegistry: Type.Optional(Type.Object({ type: Type.String({ maxLength: 64 }) }, { additionalProperties: true })),
    force: Type.Optional(Type.Boolean()),
    steps: Type.Optional(Type.Array(Step, { maxItems: 1000 })),
    startCmd: Type.Optional(Command),
    readyCmd: Type.Optional(Command),
  },
  { additionalProperties: true },
);

export const StatusQuery = Type.Object(
  {
    logsOffset: Type.Optional(Type.String({ pattern: '^[0-9]{1,9}$' })),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,3}$' })),
    level: Type.Optional(Type.Union(['debug', 'info', 'warn', 'error'].map((l) => Type.Literal(l)))),
  },
  { additionalProperties: true },
);

export const LogsQuery = Type.Object(
  {
    cursor: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$' })),
    limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,3}$' })),
    direction: Type.Optional(Type.Union([Type.Literal('forward'), Type.Literal('backward')])),
    level: Type.Optional(Type.Union(['debug', 'info', 'warn', 'error'].map((l) => Type.Literal(l)))),
    source: Type.Optional(Type.Union([Type.Literal('temporary'), Type.Literal('persistent')])),
  },
  { additionalProperties: true },
);

export const PageQuery = Type.Object(
  { limit: Type.Optional(Type.String({ pattern: '^[0-9]{1,4}$' })), nextToken: Type.Optional(Type.String({ maxLength: 512 })), teamID: Type.Optional(TeamId) },
  { additionalProperties: true },
);

export const UpdateTemplateBody = Type.Object({ public: Type.Optional(Type.Boolean()) }, { additionalProperties: true });
export const AssignTagsBody = Type.Object({ target: Name, tags: Type.Array(Type.String({ maxLength: 128 }), { minItems: 1, maxItems: 50 }) }, { additionalProperties: true });
export const RemoveTagsBody = Type.Object({ name: Name, tags: Type.Array(Type.String({ maxLength: 128 }), { minItems: 1, maxItems: 50 }) }, { additionalProperties: true });
