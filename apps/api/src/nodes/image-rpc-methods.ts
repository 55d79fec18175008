/**
 * The node channel's image-engine table: what a template build needs of a node's engine (images, build
 * containers, their files, commits), so builds run on any node (`POST /v1/image/<method>` with `{ "args": [...] }`,
 * plus two streams: `POST /v1/image/writeArchive?container=&directory=` with a tar body and `POST
 * /v1/image/readArchive` answering one). Arguments are checked before the engine sees them: containers must be
 * build containers (the agent checks their label), work containers must carry the build labels, paths are absolute
 * and clean, image names cannot become other engine paths. The platform's registry credentials never travel here;
 * a base image's own pull credentials (the build's `fromImageRegistry`) do, over mutual TLS, and are never logged.
 */
import { type TSchema, Type } from '@sinclair/typebox';
import { BUILD_ROLE_LABEL } from '../runtime/docker/docker-labels.ts';

const PATH_COMPONENT = '[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*';
const ImageRef = Type.String({
  maxLength: 512,
  pattern: `^(?:(?:[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*(?::[0-9]{1,5})?/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?|sha256:[a-f0-9]{64}|[a-f0-9]{12,64})$`,
});
const ContainerId = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$' });
/** A path inside a build container: absolute, no `.`/`..` components, no NUL (`/` itself allowed). */
export const ContainerPath = Type.String({ maxLength: 4096, pattern: '^(?:/|(?:/(?!\\.\\.?(?:/|$))[^/\\x00]+)+/?)$' });
const Labels = Type.Record(Type.String({ minLength: 1, maxLength: 256, pattern: '^[A-Za-z0-9][A-Za-z0-9_.\\-/]*$' }), Type.String({ maxLength: 4096 }), { maxProperties: 64 });
const Strings = Type.Array(Type.String({ maxLength: 65_536 }), { maxItems: 256 });
const ImageConfig = Type.Object(
  {
    env: Type.Array(Type.String({ maxLength: 65_536 }), { maxItems: 4096 }),
    entrypoint: Type.Union([Strings, Type.Null()]),
    cmd: Type.Union([Strings, Type.Null()]),
    workdir: Type.String({ maxLength: 4096 }),
    user: Type.String({ maxLength: 256 }),
    exposedPorts: Type.Array(Type.String({ maxLength: 32 }), { maxItems: 1024 }),
    labels: Labels,
  },
  { additionalProperties: false },
);
const WorkContainerSpec = Type.Object(
  {
    image: ImageRef,
    name: ContainerId,
    // Work containers are build containers: the agent serves no other kind.
    labels: Type.Intersect([Labels, Type.Object({ [BUILD_ROLE_LABEL]: Type.Literal('container') })]),
    entrypoint: Strings,
    cmd: Strings,
    user: Type.String({ maxLength: 64, pattern: '^[A-Za-z0-9_.:-]*$' }),
    cpuCount: Type.Number({ exclusiveMinimum: 0, maximum: 1024 }),
    memoryMB: Type.Integer({ minimum: 6, maximum: 4 * 1024 * 1024 }),
    network: Type.Boolean(),
  },
  { additionalProperties: false },
);
const Login = Type.Union([
  Type.Object({ username: Type.String({ maxLength: 1024 }), password: Type.String({ maxLength: 8192 }), server: Type.String({ maxLength: 512 }) }, { additionalProperties: false }),
  Type.Null(),
]);
const CommitOptions = Type.Object(
  {
    labels: Type.Optional(Labels),
    config: Type.Optional(Type.Object({ entrypoint: Type.Optional(Type.Union([Strings, Type.Null()])), cmd: Type.Optional(Type.Union([Strings, Type.Null()])), user: Type.Optional(Type.String({ maxLength: 256 })) }, { additionalProperties: false })),
  },
  { additionalProperties: false },
);
const ImageInfo = Type.Object(
  { id: Type.String({ maxLength: 128 }), tags: Type.Array(Type.String({ maxLength: 512 }), { maxItems: 10_000 }), layerCount: Type.Integer({ minimum: 0 }), size: Type.Number({ minimum: 0 }), config: ImageConfig },
  { additionalProperties: false },
);
const ImageSummary = Type.Object({ id: Type.String({ maxLength: 128 }), tags: Type.Array(Type.String({ maxLength: 512 }), { maxItems: 10_000 }), labels: Labels }, { additionalProperties: false });
const Void = Type.Null();

/** Methods taking a container as first argument: the agent serves them only for build containers. */
export const CONTAINER_METHODS = new Set(['startContainer', 'containerAddress', 'isRunning', 'waitForExit', 'removeContainer', 'statPath', 'readFile', 'readArchive', 'writeArchive', 'commit', 'flatten']);

export const IMAGE_METHODS = {
  inspectImage: { args: Type.Tuple([ImageRef]), result: Type.Union([ImageInfo, Type.Null()]) },
  // Progress lines come back with the answer (at most the last 200).
  pullImage: { args: Type.Tuple([ImageRef, Login]), result: Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 200 }) },
  tagImage: { args: Type.Tuple([ImageRef, ImageRef]), result: Void },
  removeImage: { args: Type.Tuple([ImageRef]), result: Type.Boolean() },
  createContainer: { args: Type.Tuple([WorkContainerSpec]), result: ContainerId },
  startContainer: { args: Type.Tuple([ContainerId]), result: Void },
  containerAddress: { args: Type.Tuple([ContainerId]), result: Type.Union([Type.String({ maxLength: 64 }), Type.Null()]) },
  isRunning: { args: Type.Tuple([ContainerId]), result: Type.Boolean() },
  waitForExit: { args: Type.Tuple([ContainerId, Type.Integer({ minimum: 1, maximum: 24 * 3600 * 1000 })]), result: Type.Object({ exitCode: Type.Integer(), output: Type.String() }, { additionalProperties: false }) },
  removeContainer: { args: Type.Tuple([ContainerId]), result: Void },
  statPath: { args: Type.Tuple([ContainerId, ContainerPath]), result: Type.Object({ exists: Type.Boolean(), isDirectory: Type.Boolean(), linkTarget: Type.Optional(Type.String({ maxLength: 4096 })) }, { additionalProperties: false }) },
  /** The file's bytes as base64 (engine limit 16 MiB), or null. */
  readFile: { args: Type.Tuple([ContainerId, ContainerPath]), result: Type.Union([Type.String(), Type.Null()]) },
  commit: { args: Type.Tuple([ContainerId, CommitOptions]), result: Type.String({ maxLength: 128 }) },
  flatten: { args: Type.Tuple([ContainerId, ImageConfig]), result: Type.String({ maxLength: 128 }) },
  listContainers: { args: Type.Tuple([Labels]), result: Type.Array(ContainerId, { maxItems: 100_000 }) },
  listImages: { args: Type.Tuple([Labels]), result: Type.Array(ImageSummary, { maxItems: 100_000 }) },
  /** Stream: answers the tar of a path (HTTP 200, application/x-tar) or an error. */
  readArchive: { args: Type.Tuple([ContainerId, ContainerPath]), result: Void },
} satisfies Record<string, { args: TSchema; result: TSchema }>;

export type ImageMethodName = keyof typeof IMAGE_METHODS;

export function isImageMethod(name: string): name is ImageMethodName {
  return Object.hasOwn(IMAGE_METHODS, name);
}
