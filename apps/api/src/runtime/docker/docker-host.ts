import Docker from 'dockerode';

/** `unix:///path`, `tcp://host:port` or `http://host:port` (TIDEPOOL_DOCKER_HOST); '' = dockerode's default. */
export const DOCKER_HOST_PATTERN = '^$|^unix:///.+$|^(tcp|http)://([A-Za-z0-9.-]+|\\[[0-9A-Fa-f:]+\\]):[0-9]{1,5}$';

/**
 * The one engine client of the platform. '' leaves it to dockerode (DOCKER_HOST, else /var/run/docker.sock);
 * in docker-compose.yml the API reaches the engine only through the docker gate (tcp://docker-gate:2375).
 */
export function dockerClient(dockerHost: string): Docker {
  if (!dockerHost) return new Docker();
  if (dockerHost.startsWith('unix://')) return new Docker({ socketPath: dockerHost.slice('unix://'.length) });
  const url = new URL(dockerHost.replace(/^tcp:/, 'http:'));
  return new Docker({ protocol: 'http', host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port) });
}
