/*
 * exec-as-user --serve: a small, long-lived spawn server for envd.
 *
 * Forking envd itself (a Node process with tens of MB resident) costs milliseconds per command:
 * the kernel copies and later tears down its page tables, and libuv blocks the event loop until
 * the child has exec'd. This server is a few hundred KB, so its fork is cheap, and it switches
 * users itself, so commands start with one exec instead of two.
 *
 * Protocol (envd is the only client; stdin = requests, stdout = replies, stderr = diagnostics):
 *
 *   request  = u32 little-endian payload length, payload
 *   payload  = kind byte, then NUL-terminated text fields
 *     'S' id uid gid groups("1,2"|"-") stdin("p"|"n") cwd argc argv... envc env...   spawn
 *     'C' id                                                                      drop pipe copies
 *     'K' id signo                                                                 signal the child
 *
 *   replies (one line each)
 *     P <id> <pid> <stdin-fd|-1> <stdout-fd> <stderr-fd>   started; envd opens /proc/<server>/fd/<n>
 *                                                           and then sends 'C' so that the server
 *                                                           closes its copies
 *     F <id> <errno> <stage>                               failed before exec (pipe, fork, chdir, user)
 *     X <id> <wait-status>                                 the child ended (raw waitpid status)
 *
 * A child gets default signal dispositions and an empty signal mask (like libuv's children),
 * oom_score_adj 100, the request's groups/gid/uid, cwd and environment, and is exec'd with
 * execvp using the request's PATH. An exec failure is reported like the one-shot mode: a message
 * on the child's stderr and exit status 127 (not found) or 126.
 * The server exits when envd closes its stdin.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec-as-user.h"

#define MAX_MESSAGE (64u * 1024u * 1024u)

extern char **environ;

struct child {
  unsigned long id;
  pid_t pid; /* 0 once reaped */
  int fds[4]; /* copies kept until 'C': stdin write, stdin read, stdout read, stderr read (-1 = none) */
};

static struct child *children;
static size_t nchildren, capchildren;

static void close_copies(struct child *c) {
  for (int i = 0; i < 4; i++) {
    if (c->fds[i] >= 0) close(c->fds[i]);
    c->fds[i] = -1;
  }
}

static struct child *find_child(unsigned long id) {
  for (size_t i = 0; i < nchildren; i++)
    if (children[i].id == id) return &children[i];
  return NULL;
}

static void forget_child(struct child *c) {
  close_copies(c);
  *c = children[--nchildren];
}

static int maybe_forget(struct child *c) {
  /* An entry is needed while the child runs (signals) or envd still has to open its pipes. */
  if (c->pid == 0 && c->fds[0] < 0 && c->fds[1] < 0 && c->fds[2] < 0 && c->fds[3] < 0) {
    forget_child(c);
    return 1;
  }
  return 0;
}

static struct child *add_child(void) {
  if (nchildren == capchildren) {
    size_t cap = capchildren ? capchildren * 2 : 64;
    struct child *grown = realloc(children, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    children = grown;
    capchildren = cap;
  }
  return &children[nchildren++];
}

static void reply(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void reply(const char *fmt, ...) {
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = (size_t)n < sizeof line ? (size_t)n : sizeof line - 1;
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(STDOUT_FILENO, line + off, len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) exit(0); /* envd is gone */
    off += (size_t)w;
  }
}

/* Splits a payload into its NUL-terminated fields; returns the count or -1. */
static int split_fields(char *buf, size_t len, char ***out) {
  size_t count = 0;
  for (size_t i = 0; i < len; i++)
    if (buf[i] == '\0') count++;
  if (len == 0 || buf[len - 1] != '\0') return -1;
  char **fields = malloc((count + 1) * sizeof *fields);
  if (fields == NULL) return -1;
  size_t k = 0;
  for (size_t i = 0; i < len; i += strlen(buf + i) + 1) fields[k++] = buf + i;
  fields[k] = NULL;
  *out = fields;
  return (int)count;
}

static int parse_ulong(const char *text, unsigned long *out) {
  char *end = NULL;
  if (text == NULL || *text == '\0' || *text == '-') return -1;
  errno = 0;
  unsigned long value = strtoul(text, &end, 10);
  if (errno != 0 || *end != '\0') return -1;
  *out = value;
  return 0;
}

/* Runs in the forked child: never returns. `errfd` reports pre-exec failures to the server. */
static void child_exec(int errfd, gid_t gid, uid_t uid, gid_t *groups, int ngroups,
                       const char *cwd, char **argv, char **envp) {
  const char *stage = "signals";
  for (int s = 1; s < NSIG; s++) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    signal(s, SIG_DFL);
  }
  sigset_t empty;
  sigemptyset(&empty);
  if (sigprocmask(SIG_SETMASK, &empty, NULL) != 0) goto fail;
  stage = "chdir";
  if (chdir(cwd) != 0) goto fail;
  raise_oom_score();
  stage = "user";
  if (switch_user(uid, gid, groups, ngroups) != 0) goto fail;
  environ = envp;
  execvp(argv[0], argv);
  int err = errno;
  dprintf(STDERR_FILENO, "exec-as-user: %s: %s\n", argv[0], strerror(err));
  _exit((err == ENOENT || err == ENOTDIR) ? 127 : 126);
fail: {
    int err = errno;
    char msg[64];
    int n = snprintf(msg, sizeof msg, "%d %s", err, stage);
    if (n > 0) {
      ssize_t ignored = write(errfd, msg, (size_t)n);
      (void)ignored;
    }
    _exit(125);
  }
}

static void handle_spawn(char **f, int nf) {
  /* id uid gid groups stdin cwd argc argv... envc env... */
  static gid_t groups[MAX_GROUPS];
  unsigned long id, uid, gid, argc, envc;
  if (nf < 8 || parse_ulong(f[0], &id) != 0) {
    fprintf(stderr, "exec-as-user --serve: malformed spawn request\n");
    return;
  }
  int ngroups = parse_groups(f[3], groups, MAX_GROUPS);
  if (parse_ulong(f[1], &uid) != 0 || parse_ulong(f[2], &gid) != 0 || ngroups < 0 || parse_ulong(f[6], &argc) != 0 ||
      argc == 0 || 7 + argc >= (unsigned long)nf || parse_ulong(f[7 + argc], &envc) != 0 ||
      8 + argc + envc != (unsigned long)nf) {
    reply("F %lu %d request\n", id, EINVAL);
    return;
  }
  int want_stdin = strcmp(f[4], "p") == 0;
  char **argv = &f[7];
  char **envp = &f[8 + argc];
  /* argv and envp must be NULL-terminated: reuse the slot after each list. */
  char *saved_envc = f[7 + argc];
  f[7 + argc] = NULL;

  int in[2] = {-1, -1}, out[2] = {-1, -1}, errp[2] = {-1, -1}, report[2] = {-1, -1};
  const char *stage = "pipe";
  if (want_stdin ? pipe2(in, O_CLOEXEC) != 0 : (in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) goto fail;
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0 || pipe2(report, O_CLOEXEC) != 0) goto fail;

  stage = "fork";
  pid_t pid = fork();
  if (pid < 0) goto fail;
  if (pid == 0) {
    if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0 || dup2(errp[1], 2) < 0) _exit(125);
    child_exec(report[1], (gid_t)gid, (uid_t)uid, groups, ngroups, f[5], argv, envp);
  }
  close(report[1]);
  report[1] = -1;
  close(out[1]);
  close(errp[1]);
  out[1] = errp[1] = -1;

  /* Wait for exec (the CLOEXEC pipe closes) or a pre-exec failure report. */
  char msg[64];
  ssize_t n;
  do n = read(report[0], msg, sizeof msg - 1);
  while (n < 0 && errno == EINTR);
  close(report[0]);
  report[0] = -1;

  if (n > 0) {
    /* The child exits 125 right away; collect it here so that it never reaches reap(). */
    msg[n] = '\0';
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    errno = atoi(msg);
    const char *space = strchr(msg, ' ');
    stage = space ? space + 1 : "exec";
    goto fail;
  }
  struct child *c = add_child();
  if (c == NULL) {
    /* No memory for bookkeeping: the child could not be tracked, so stop it. */
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
    errno = ENOMEM;
    stage = "track";
    goto fail;
  }
  c->id = id;
  c->pid = pid;
  c->fds[0] = want_stdin ? in[1] : -1;
  c->fds[1] = want_stdin ? in[0] : -1;
  c->fds[2] = out[0];
  c->fds[3] = errp[0];
  if (!want_stdin) close(in[0]);
  f[7 + argc] = saved_envc;
  reply("P %lu %d %d %d %d\n", id, (int)pid, want_stdin ? in[1] : -1, out[0], errp[0]);
  return;

fail: {
    int err = errno;
    int fds[] = {in[0], in[1], out[0], out[1], errp[0], errp[1], report[0], report[1]};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
      if (fds[i] >= 0) close(fds[i]);
    f[7 + argc] = saved_envc;
    reply("F %lu %d %s\n", id, err, stage);
  }
}

static void handle_close(char **f, int nf) {
  unsigned long id;
  if (nf < 1 || parse_ulong(f[0], &id) != 0) return;
  struct child *c = find_child(id);
  if (c == NULL) return;
  close_copies(c);
  maybe_forget(c);
}

static void handle_kill(char **f, int nf) {
  unsigned long id, signo;
  if (nf < 2 || parse_ulong(f[0], &id) != 0 || parse_ulong(f[1], &signo) != 0) return;
  struct child *c = find_child(id);
  if (c != NULL && c->pid > 0) kill(c->pid, (int)signo);
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    for (size_t i = 0; i < nchildren; i++) {
      struct child *c = &children[i];
      if (c->pid != pid) continue;
      c->pid = 0;
      reply("X %lu %d\n", c->id, status);
      maybe_forget(c);
      break;
    }
  }
}

/* Reads exactly len bytes; returns 0 on success, -1 on EOF or error. */
static int read_full(int fd, void *buf, size_t len) {
  size_t off = 0;
  while (off < len) {
    ssize_t n = read(fd, (char *)buf + off, len - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    off += (size_t)n;
  }
  return 0;
}

int serve_main(void) {
  signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &mask, NULL) != 0) return 125;
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0) return 125;
  fcntl(STDIN_FILENO, F_SETFD, FD_CLOEXEC);
  fcntl(STDOUT_FILENO, F_SETFD, FD_CLOEXEC);

  for (;;) {
    struct pollfd pfd[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    if (poll(pfd, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return 125;
    }
    if (pfd[1].revents & POLLIN) {
      struct signalfd_siginfo info;
      while (read(sfd, &info, sizeof info) > 0) {
      }
      reap();
    }
    if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      unsigned char header[4];
      if (read_full(STDIN_FILENO, header, 4) != 0) return 0;
      uint32_t len = (uint32_t)header[0] | (uint32_t)header[1] << 8 | (uint32_t)header[2] << 16 | (uint32_t)header[3] << 24;
      if (len == 0 || len > MAX_MESSAGE) {
        fprintf(stderr, "exec-as-user --serve: bad request length %u\n", len);
        return 125;
      }
      char *buf = malloc(len);
      if (buf == NULL || read_full(STDIN_FILENO, buf, len) != 0) return 125;
      char **fields = NULL;
      int nf = split_fields(buf + 1, len - 1, &fields);
      if (nf >= 0) {
        if (buf[0] == 'S') handle_spawn(fields, nf);
        else if (buf[0] == 'C') handle_close(fields, nf);
        else if (buf[0] == 'K') handle_kill(fields, nf);
        else fprintf(stderr, "exec-as-user --serve: unknown request '%c'\n", buf[0]);
      } else {
        fprintf(stderr, "exec-as-user --serve: malformed request\n");
      }
      free(fields);
      free(buf);
      /* Children that ended while this request was handled. */
      reap();
    }
  }
}
