import { Type } from '@sinclair/typebox';

/** Strings are bounded loosely here; secret-rules.ts applies the real limits with messages that say them. */
const Metadata = Type.Record(Type.String(), Type.String());

/** `NewSecret`: what `Secret.create` sends (`metadata` is absent when not given). Unknown fields are ignored. */
export const NewSecretBody = Type.Object({ name: Type.String({ maxLength: 1000 }), value: Type.String(), metadata: Type.Optional(Metadata) }, { additionalProperties: true });

/** `SecretUpdate`: what `Secret.update` sends. */
export const SecretUpdateBody = Type.Object({ value: Type.String(), metadata: Type.Optional(Metadata) }, { additionalProperties: true });

export const SecretParams = Type.Object({ secretID: Type.String({ minLength: 1, maxLength: 200 }) });

export const SecretListQuery = Type.Object({ limit: Type.Optional(Type.String()), nextToken: Type.Optional(Type.String({ maxLength: 1000 })) });
