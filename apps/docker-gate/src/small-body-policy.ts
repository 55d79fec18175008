import { BodyError, foldFields, isEmpty, isObject, isUnset, optionalString } from './json-fields.ts';
import { MANAGED_NETWORK_LABEL } from './platform-labels.ts';

/** `POST /containers/{id}/exec`: never privileged (the platform itself never execs; tools may, into its containers). */
export function execCreateProblem(body: unknown): string | undefined {
  try {
    if (!isObject(body)) return 'the body must be a JSON object';
    const fields = foldFields(body, 'body');
    if (!isEmpty(fields.get('privileged'))) return 'privileged exec is not allowed';
    return undefined;
  } catch (error) {
    if (error instanceof BodyError) return error.message;
    throw error;
  }
}

const NETWORK_FIELDS = new Set(['name', 'driver', 'checkduplicate', 'labels', 'options', 'internal', 'enableipv6', 'ipam', 'attachable']);
const NETWORK_OPTIONS = new Set(['com.docker.network.bridge.enable_icc']);

/**
 * `POST /networks/create`: a bridge network labelled as the platform's (sandbox-network.ts networkSpec), with
 * no driver options but inter-container traffic, so it cannot take over a host interface or bridge name.
 */
export function networkCreateProblem(body: unknown): string | undefined {
  try {
    if (!isObject(body)) return 'the body must be a JSON object';
    const fields = foldFields(body, 'body');
    for (const [key, value] of fields) if (!NETWORK_FIELDS.has(key) && !isUnset(value)) return `network field ${key} is not allowed`;
    const driver = optionalString(fields.get('driver'), 'Driver');
    if (driver !== '' && driver !== 'bridge') return `network driver '${driver}' is not allowed (bridge only)`;
    const labels = fields.get('labels');
    if (!isObject(labels) || labels[MANAGED_NETWORK_LABEL] !== 'true') return `networks must carry the label ${MANAGED_NETWORK_LABEL}=true`;
    const options = fields.get('options');
    if (options !== undefined && options !== null && !isObject(options)) return 'Options must be an object';
    for (const key of Object.keys(options ?? {})) if (!NETWORK_OPTIONS.has(key)) return `network option ${key} is not allowed`;
    return undefined;
  } catch (error) {
    if (error instanceof BodyError) return error.message;
    throw error;
  }
}
