import { invalid } from '../errors.ts';
import { checkFilesHash } from './context-files.ts';
import type { BuildSpec, BuildStep, RegistryCredentials, StepType } from './template-model.ts';

const STEP_TYPES = new Set<StepType>(['COPY', 'RUN', 'ENV', 'WORKDIR', 'USER']);
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const USER_NAME = /^([a-z_][a-z0-9_.-]{0,31}\$?|\d{1,10})$/;
/** A COPY owner: `user` or `user:group` (names or ids), as Dockerfile `COPY --chown=user:group` sends it. */
const OWNER = /^([a-z_][a-z0-9_.-]{0,31}\$?|\d{1,10})(:([a-z_][a-z0-9_.-]{0,31}\$?|\d{1,10}))?$/;
const IMAGE_REF = /^[a-zA-Z0-9][a-zA-Z0-9._\/:@-]{0,255}$/;
const OCTAL_MODE = /^[0-7]{3,4}$/;
const MAX_STEPS = 1000;
const MAX_COMMAND = 64 * 1024;

/** The request body as it arrives (already checked to be an object with these optional members). */
export interface BuildStartBody {
  fromImage?: string;
  fromTemplate?: string;
  fromImageRegistry?: Record<string, unknown>;
  force?: boolean;
  steps?: Array<{ type: string; args?: string[]; filesHash?: string; force?: boolean; resolveSymlinks?: boolean }>;
  startCmd?: string;
  readyCmd?: string;
}

const text = (value: string, what: string, max = MAX_COMMAND): string => {
  if (value.length > max) throw invalid(`${what} is longer than ${max} characters`);
  if (value.includes('\0')) throw invalid(`${what} contains a NUL character`);
  return value;
};

/** A context path: relative, and not leaving the context directory. */
function contextPath(src: string, where: string): string {
  const parts = src.replaceAll('\\', '/').split('/');
  if (src === '' || src.startsWith('/') || parts.some((p) => p === '..')) {
    throw invalid(`${where}: COPY source '${src}' must be a path inside the build context (relative, without '..')`);
  }
  return src;
}

function checkStep(raw: NonNullable<BuildStartBody['steps']>[number], index: number): BuildStep {
  const where = `step ${index}`;
  if (!STEP_TYPES.has(raw.type as StepType)) throw invalid(`${where}: unknown step type '${raw.type}' (expected COPY, RUN, ENV, WORKDIR or USER)`);
  const type = raw.type as StepType;
  const args = raw.args ?? [];
  args.forEach((arg, i) => text(arg, `${where} argument ${i}`));
  const step: BuildStep = { type, args, force: raw.force ?? false };
  switch (type) {
    case 'COPY': {
      if (args.length < 2 || args.length > 4) throw invalid(`${where}: COPY takes [src, dest, user?, mode?], got ${args.length} arguments`);
      contextPath(args[0], where);
      if (args[1] === '') throw invalid(`${where}: COPY needs a destination`);
      if (args[2] && !OWNER.test(args[2])) throw invalid(`${where}: invalid owner '${args[2]}' (expected user or user:group)`);
      if (args[3] && !OCTAL_MODE.test(args[3])) throw invalid(`${where}: invalid mode '${args[3]}' (expected an octal mode such as 0644)`);
      if (raw.filesHash === undefined) throw invalid(`${where}: COPY needs the filesHash of its uploaded files`);
      step.filesHash = checkFilesHash(raw.filesHash);
      if (raw.resolveSymlinks !== undefined) step.resolveSymlinks = raw.resolveSymlinks;
      break;
    }
    case 'RUN':
      if (args.length < 1 || args.length > 2 || args[0].trim() === '') throw invalid(`${where}: RUN takes [command, user?] with a non-empty command`);
      if (args[1] && !USER_NAME.test(args[1])) throw invalid(`${where}: invalid user '${args[1]}'`);
      break;
    case 'ENV':
      if (args.length === 0 || args.length % 2 !== 0) throw invalid(`${where}: ENV takes pairs [name, value, …], got ${args.length} arguments`);
      for (let i = 0; i < args.length; i += 2) if (!ENV_NAME.test(args[i])) throw invalid(`${where}: invalid environment variable name '${args[i]}'`);
      break;
    case 'WORKDIR':
      if (args.length !== 1 || args[0] === '') throw invalid(`${where}: WORKDIR takes one path`);
      break;
    case 'USER':
      if (args.length !== 1 || !USER_NAME.test(args[0])) throw invalid(`${where}: USER takes one valid user name`);
      break;
  }
  return step;
}

function checkCredentials(raw: Record<string, unknown>): RegistryCredentials {
  const field = (name: string): string => {
    const value = raw[name];
    if (typeof value !== 'string' || value === '') throw invalid(`fromImageRegistry.${name} must be a non-empty string`);
    return value;
  };
  switch (raw.type) {
    case 'registry':
      return { type: 'registry', username: field('username'), password: field('password') };
    case 'aws':
      return { type: 'aws', awsAccessKeyId: field('awsAccessKeyId'), awsSecretAccessKey: field('awsSecretAccessKey'), awsRegion: field('awsRegion') };
    case 'gcp':
      return { type: 'gcp', serviceAccountJson: field('serviceAccountJson') };
    default:
      throw invalid(`fromImageRegistry.type must be 'registry', 'aws' or 'gcp'`);
  }
}

/** Validates `TemplateBuildStartV2` into a BuildSpec; every problem is an `invalid` error naming the field. */
export function parseBuildRequest(body: BuildStartBody): BuildSpec {
  if (body.fromImage !== undefined && body.fromTemplate !== undefined) throw invalid('give either fromImage or fromTemplate, not both');
  if (body.fromImage !== undefined && !IMAGE_REF.test(body.fromImage)) throw invalid(`invalid fromImage '${body.fromImage}'`);
  if (body.fromImageRegistry !== undefined && body.fromImage === undefined) throw invalid('fromImageRegistry needs fromImage');
  const steps = body.steps ?? [];
  if (steps.length > MAX_STEPS) throw invalid(`a template has at most ${MAX_STEPS} steps, got ${steps.length}`);
  return {
    fromImage: body.fromImage ?? null,
    fromTemplate: body.fromTemplate ?? null,
    fromImageRegistry: body.fromImageRegistry === undefined ? null : checkCredentials(body.fromImageRegistry),
    force: body.force ?? false,
    steps: steps.map(checkStep),
    startCmd: body.startCmd === undefined || body.startCmd === '' ? null : text(body.startCmd, 'startCmd'),
    readyCmd: body.readyCmd === undefined || body.readyCmd === '' ? null : text(body.readyCmd, 'readyCmd'),
  };
}

/** The files hashes a build needs uploaded before it can start. */
export const filesHashesOf = (spec: BuildSpec): string[] => [...new Set(spec.steps.flatMap((s) => (s.filesHash ? [s.filesHash] : [])))];
