/**
 * Structural schemas of the Kubernetes kinds deploy/kubernetes uses: required fields and their types, and no
 * field the kind does not have (a misspelt key is an error here, as it is for `kubectl apply --validate`). Own
 * and deliberately small: only the fields these manifests may use are listed; a new field means a line here.
 */
import { type TSchema, Type } from '@sinclair/typebox';

const strict = { additionalProperties: false } as const;
const Name = Type.String({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$', maxLength: 253 });
const Labels = Type.Record(Type.String({ minLength: 1 }), Type.String());
const PortNumber = Type.Integer({ minimum: 1, maximum: 65535 });
const PortRef = Type.Union([PortNumber, Type.String({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 15 })]);
const Quantities = Type.Record(Type.String(), Type.String());
const Strings = Type.Array(Type.String());

const Metadata = Type.Object({ name: Name, namespace: Type.Optional(Name), labels: Type.Optional(Labels), annotations: Type.Optional(Labels) }, strict);

function kind(apiVersion: string, name: string, fields: Record<string, TSchema>): TSchema {
  return Type.Object({ apiVersion: Type.Literal(apiVersion), kind: Type.Literal(name), metadata: Metadata, ...fields }, strict);
}

const Probe = Type.Object(
  {
    httpGet: Type.Optional(Type.Object({ path: Type.String({ pattern: '^/' }), port: PortRef, scheme: Type.Optional(Type.Union([Type.Literal('HTTP'), Type.Literal('HTTPS')])) }, strict)),
    tcpSocket: Type.Optional(Type.Object({ port: PortRef }, strict)),
    exec: Type.Optional(Type.Object({ command: Strings }, strict)),
    initialDelaySeconds: Type.Optional(Type.Integer({ minimum: 0 })),
    periodSeconds: Type.Optional(Type.Integer({ minimum: 1 })),
    timeoutSeconds: Type.Optional(Type.Integer({ minimum: 1 })),
    failureThreshold: Type.Optional(Type.Integer({ minimum: 1 })),
    successThreshold: Type.Optional(Type.Integer({ minimum: 1 })),
  },
  strict,
);

const KeyRef = Type.Object({ name: Name, key: Type.String({ minLength: 1 }), optional: Type.Optional(Type.Boolean()) }, strict);

const EnvVar = Type.Object(
  {
    name: Type.String({ pattern: '^[A-Za-z_][A-Za-z0-9_]*$' }),
    value: Type.Optional(Type.String()),
    valueFrom: Type.Optional(
      Type.Object(
        {
          secretKeyRef: Type.Optional(KeyRef),
          configMapKeyRef: Type.Optional(KeyRef),
          fieldRef: Type.Optional(Type.Object({ fieldPath: Type.String({ minLength: 1 }), apiVersion: Type.Optional(Type.String()) }, strict)),
        },
        strict,
      ),
    ),
  },
  strict,
);

const Container = Type.Object(
  {
    name: Name,
    image: Type.String({ minLength: 1 }),
    command: Type.Optional(Strings),
    args: Type.Optional(Strings),
    ports: Type.Optional(
      Type.Array(
        Type.Object(
          {
            name: Type.Optional(Type.String({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$', maxLength: 15 })),
            containerPort: PortNumber,
            hostPort: Type.Optional(PortNumber),
            protocol: Type.Optional(Type.Union([Type.Literal('TCP'), Type.Literal('UDP'), Type.Literal('SCTP')])),
          },
          strict,
        ),
      ),
    ),
    env: Type.Optional(Type.Array(EnvVar)),
    envFrom: Type.Optional(Type.Array(Type.Object({ configMapRef: Type.Optional(Type.Object({ name: Name }, strict)), secretRef: Type.Optional(Type.Object({ name: Name }, strict)) }, strict))),
    readinessProbe: Type.Optional(Probe),
    livenessProbe: Type.Optional(Probe),
    startupProbe: Type.Optional(Probe),
    resources: Type.Optional(Type.Object({ requests: Type.Optional(Quantities), limits: Type.Optional(Quantities) }, strict)),
    securityContext: Type.Optional(
      Type.Object(
        {
          allowPrivilegeEscalation: Type.Optional(Type.Boolean()),
          readOnlyRootFilesystem: Type.Optional(Type.Boolean()),
          privileged: Type.Optional(Type.Boolean()),
          runAsUser: Type.Optional(Type.Integer({ minimum: 0 })),
          runAsNonRoot: Type.Optional(Type.Boolean()),
          capabilities: Type.Optional(Type.Object({ add: Type.Optional(Strings), drop: Type.Optional(Strings) }, strict)),
        },
        strict,
      ),
    ),
    volumeMounts: Type.Optional(Type.Array(Type.Object({ name: Name, mountPath: Type.String({ pattern: '^/' }), readOnly: Type.Optional(Type.Boolean()), subPath: Type.Optional(Type.String()) }, strict))),
  },
  strict,
);

const KeyToPath = Type.Array(Type.Object({ key: Type.String({ minLength: 1 }), path: Type.String({ minLength: 1 }), mode: Type.Optional(Type.Integer({ minimum: 0, maximum: 0o777 })) }, strict));

const Volume = Type.Object(
  {
    name: Name,
    secret: Type.Optional(Type.Object({ secretName: Name, defaultMode: Type.Optional(Type.Integer({ minimum: 0, maximum: 0o777 })), items: Type.Optional(KeyToPath) }, strict)),
    configMap: Type.Optional(Type.Object({ name: Name, defaultMode: Type.Optional(Type.Integer({ minimum: 0, maximum: 0o777 })), items: Type.Optional(KeyToPath) }, strict)),
    emptyDir: Type.Optional(Type.Object({ medium: Type.Optional(Type.String()), sizeLimit: Type.Optional(Type.String()) }, strict)),
    hostPath: Type.Optional(
      Type.Object(
        {
          path: Type.String({ pattern: '^/' }),
          type: Type.Optional(Type.Union(['', 'DirectoryOrCreate', 'Directory', 'FileOrCreate', 'File', 'Socket', 'CharDevice', 'BlockDevice'].map((t) => Type.Literal(t)))),
        },
        strict,
      ),
    ),
    persistentVolumeClaim: Type.Optional(Type.Object({ claimName: Name, readOnly: Type.Optional(Type.Boolean()) }, strict)),
  },
  strict,
);

const PodSpec = Type.Object(
  {
    serviceAccountName: Type.Optional(Name),
    automountServiceAccountToken: Type.Optional(Type.Boolean()),
    hostNetwork: Type.Optional(Type.Boolean()),
    hostPID: Type.Optional(Type.Boolean()),
    dnsPolicy: Type.Optional(Type.Union(['ClusterFirst', 'ClusterFirstWithHostNet', 'Default', 'None'].map((t) => Type.Literal(t)))),
    nodeSelector: Type.Optional(Labels),
    terminationGracePeriodSeconds: Type.Optional(Type.Integer({ minimum: 0 })),
    imagePullSecrets: Type.Optional(Type.Array(Type.Object({ name: Name }, strict))),
    securityContext: Type.Optional(
      Type.Object(
        {
          runAsNonRoot: Type.Optional(Type.Boolean()),
          runAsUser: Type.Optional(Type.Integer({ minimum: 0 })),
          runAsGroup: Type.Optional(Type.Integer({ minimum: 0 })),
          fsGroup: Type.Optional(Type.Integer({ minimum: 0 })),
          seccompProfile: Type.Optional(Type.Object({ type: Type.Union([Type.Literal('RuntimeDefault'), Type.Literal('Unconfined'), Type.Literal('Localhost')]) }, strict)),
        },
        strict,
      ),
    ),
    containers: Type.Array(Container, { minItems: 1 }),
    volumes: Type.Optional(Type.Array(Volume)),
  },
  strict,
);

const PodTemplate = Type.Object({ metadata: Type.Object({ labels: Labels, annotations: Type.Optional(Labels) }, strict), spec: PodSpec }, strict);
const Selector = Type.Object({ matchLabels: Labels }, strict);

/** The schema of every kind the manifests may use, by kind. */
export const KIND_SCHEMAS: Record<string, TSchema> = {
  Namespace: kind('v1', 'Namespace', {}),
  ServiceAccount: kind('v1', 'ServiceAccount', { automountServiceAccountToken: Type.Optional(Type.Boolean()) }),
  ConfigMap: kind('v1', 'ConfigMap', { data: Type.Optional(Type.Record(Type.String({ pattern: '^[-._a-zA-Z0-9]+$' }), Type.String())) }),
  Secret: kind('v1', 'Secret', {
    type: Type.Optional(Type.String()),
    data: Type.Optional(Type.Record(Type.String({ pattern: '^[-._a-zA-Z0-9]+$' }), Type.String())),
    stringData: Type.Optional(Type.Record(Type.String({ pattern: '^[-._a-zA-Z0-9]+$' }), Type.String())),
  }),
  Service: kind('v1', 'Service', {
    spec: Type.Object(
      {
        type: Type.Optional(Type.Union(['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'].map((t) => Type.Literal(t)))),
        selector: Type.Optional(Labels),
        externalName: Type.Optional(Type.String({ minLength: 1 })),
        ports: Type.Optional(
          Type.Array(
            Type.Object(
              {
                name: Type.Optional(Type.String({ pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$' })),
                port: PortNumber,
                targetPort: Type.Optional(PortRef),
                nodePort: Type.Optional(PortNumber),
                protocol: Type.Optional(Type.Union([Type.Literal('TCP'), Type.Literal('UDP'), Type.Literal('SCTP')])),
              },
              strict,
            ),
          ),
        ),
      },
      strict,
    ),
  }),
  Role: kind('rbac.authorization.k8s.io/v1', 'Role', {
    rules: Type.Array(Type.Object({ apiGroups: Strings, resources: Strings, verbs: Type.Array(Type.String(), { minItems: 1 }), resourceNames: Type.Optional(Strings) }, strict)),
  }),
  RoleBinding: kind('rbac.authorization.k8s.io/v1', 'RoleBinding', {
    roleRef: Type.Object({ apiGroup: Type.Literal('rbac.authorization.k8s.io'), kind: Type.Union([Type.Literal('Role'), Type.Literal('ClusterRole')]), name: Name }, strict),
    subjects: Type.Array(
      Type.Object({ kind: Type.Union([Type.Literal('ServiceAccount'), Type.Literal('User'), Type.Literal('Group')]), name: Type.String({ minLength: 1 }), namespace: Type.Optional(Name), apiGroup: Type.Optional(Type.String()) }, strict),
      { minItems: 1 },
    ),
  }),
  Deployment: kind('apps/v1', 'Deployment', {
    spec: Type.Object(
      {
        replicas: Type.Optional(Type.Integer({ minimum: 0 })),
        selector: Selector,
        strategy: Type.Optional(
          Type.Object(
            {
              type: Type.Union([Type.Literal('RollingUpdate'), Type.Literal('Recreate')]),
              rollingUpdate: Type.Optional(Type.Object({ maxUnavailable: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.String()])), maxSurge: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.String()])) }, strict)),
            },
            strict,
          ),
        ),
        template: PodTemplate,
      },
      strict,
    ),
  }),
  DaemonSet: kind('apps/v1', 'DaemonSet', {
    spec: Type.Object(
      {
        selector: Selector,
        updateStrategy: Type.Optional(
          Type.Object(
            {
              type: Type.Union([Type.Literal('RollingUpdate'), Type.Literal('OnDelete')]),
              rollingUpdate: Type.Optional(Type.Object({ maxUnavailable: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.String()])), maxSurge: Type.Optional(Type.Union([Type.Integer({ minimum: 0 }), Type.String()])) }, strict)),
            },
            strict,
          ),
        ),
        template: PodTemplate,
      },
      strict,
    ),
  }),
};
