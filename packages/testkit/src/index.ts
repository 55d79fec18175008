// @tidepool/testkit: shared helpers for suites that need Docker, the `base` image or a real envd.
//
//   import { ensureBaseImage, startEnvdContainer } from '@tidepool/testkit';
//   beforeAll(async () => { envd = await startEnvdContainer(); });   // builds images if needed
//   afterAll(() => envd?.stop());
//
// Any image as a sandbox (the runtime copied in, `envd provision` run):
//   const { image } = await buildSandboxImage(await ensureBusyboxImage());
//   envd = await startEnvdContainer({ image });
export {
  BASE_IMAGE,
  docker,
  ensureBaseImage,
  ensureDockerEngine,
  removeTestContainers,
  repoRoot,
  run,
  type RunResult,
} from './docker.ts';
export {
  ENVD_PORT,
  initEnvd,
  startEnvdContainer,
  waitForEnvd,
  type EnvdContainer,
  type EnvdInit,
  type StartEnvdContainerOptions,
} from './envd-container.ts';
export { getFreePort } from './ports.ts';
export { removeTree } from './remove-tree.ts';
export { BUSYBOX_IMAGE, ensureBusyboxImage } from './busybox-image.ts';
export { fetchDebianPackage, extractDebianPackage } from './debian-packages.ts';
export { imageLabel } from './image-labels.ts';
export { buildSandboxImage, sandboxDockerfile, sandboxImageName, type SandboxImage } from './sandbox-image.ts';
export { Prng } from './seeded-random.ts';
export { startPostgres, type PostgresServer, type StartPostgresOptions } from './postgres-server.ts';
export { startLocalRegistry, stopRegistryIn, type LocalRegistry, type LocalRegistryOptions } from './local-registry.ts';
export { ClusterError, type ClusterErrorKind } from './cluster-error.ts';
export { clusterLayout, inBenchmarkRange, nodeLayout, parseNodeId, MAX_NODES, NODE_TLS_PORT, type ClusterLayout, type NodeLayout } from './cluster-layout.ts';
export { freeClusterSlot } from './cluster-network.ts';
export { agentFiles, agentPid, agentUrl, NODE_AGENT_PORT, NODE_METRICS_PORT, startNodeAgentProcess, stopNodeAgentProcess } from './cluster-agents.ts';
export { ensureClusterTls, ensureNodeServerTls, ensureSharedServerTls, subjectAltName, type ClientTls, type ServerTls } from './cluster-tls.ts';
export { MACHINE_DOCKER_SOCKET, loadImageIntoNode, nodeDocker, pingEngine, startNodeEngine, stopNodeEngine, type StartedEngine, type StorageDriver } from './cluster-engines.ts';
export { apiFiles, apiPid, replicaSandboxNetwork, stopApiReplica, type ApiFiles } from './cluster-apis.ts';
export { clusterPsql, postgresFiles, type ClusterPostgres } from './cluster-postgres.ts';
export {
  clusterEnv,
  clusterLeftovers,
  clusterStatus,
  downCluster,
  readClusterState,
  SANDBOX_DOMAIN,
  setClusterNodePlacement,
  startClusterNode,
  stopClusterNode,
  upCluster,
  type ClusterApiState,
  type ClusterNodeState,
  type ClusterState,
  type ClusterStatus,
  type DownReport,
  type UpOptions,
} from './local-cluster.ts';
export { machineOf, retagRegistryImage, SWARM_STACK, updateSwarmService, type ClusterSwarmState, type SwarmMember, type SwarmOptions } from './cluster-swarm.ts';
export { buildReleaseImages, imageSize, measureAgentStarts, median, RELEASE_IMAGE_NAMES, type AgentStart } from './release-images.ts';
