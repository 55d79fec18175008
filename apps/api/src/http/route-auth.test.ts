import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { ADMIN_ROUTE, authOf, OPEN_ROUTE, requireDeclaredAuth, TEAM_ROUTE } from './route-auth.ts';

function server() {
  const app = Fastify();
  requireDeclaredAuth(app);
  return app;
}

describe('requireDeclaredAuth', () => {
  it('refuses a route that declares no rule, or one that is not known, when it is registered', () => {
    const app = server();
    expect(() => app.get('/plain', async () => 'x')).toThrow("route GET /plain declares no auth: give it config.auth ('open', 'team' or 'admin', see route-auth.ts)");
    expect(() => app.get('/odd', { config: { auth: 'nobody' as never } }, async () => 'x')).toThrow('declares no auth');
    expect(() => app.get('/bearer-admin', { config: { auth: 'admin', bearer: true } }, async () => 'x')).toThrow("'bearer' goes with auth 'team' only");
  });

  it('refuses it inside a plugin scope too: the server does not start', async () => {
    const app = server();
    void app.register(async (scope) => {
      scope.put('/scoped', async () => 'x');
    });
    await expect(app.ready()).rejects.toThrow('route PUT /scoped declares no auth');
  });

  it("gives each matched request its route's rule, and a request no route matched the team rule", async () => {
    const app = server();
    const seen: unknown[] = [];
    app.addHook('onRequest', async (request) => {
      seen.push(authOf(request));
    });
    app.get('/open', { config: OPEN_ROUTE }, async () => 'x');
    app.get('/admin/x', { config: ADMIN_ROUTE }, async () => 'x');
    app.get('/team', { config: TEAM_ROUTE }, async () => 'x');
    app.get('/teams', { config: { auth: 'team', bearer: true } }, async () => 'x');
    for (const url of ['/open', '/%61dmin/x', '/team', '/teams', '/nowhere', '/ADMIN/x']) await app.inject({ url });
    expect(seen).toEqual([
      { auth: 'open', bearer: undefined },
      { auth: 'admin', bearer: undefined },
      { auth: 'team', bearer: undefined },
      { auth: 'team', bearer: true },
      TEAM_ROUTE,
      TEAM_ROUTE,
    ]);
  });
});
