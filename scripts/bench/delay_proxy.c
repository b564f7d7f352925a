/*
 * delay-proxy: a TCP proxy on 127.0.0.1 that delivers every chunk it reads, in either direction,
 * a fixed time after reading it, so that a request/answer round trip gains twice that time.
 * It stands in for netem (which this kernel lacks) in the benchmarks and fault drills.
 *
 *   delay-proxy --delay-us N --route LISTEN_PORT:UPSTREAM_HOST:UPSTREAM_PORT [--route ...]
 *
 * N may have a fraction (0.5 = 500 ns). Single-threaded: one epoll loop, and one timerfd
 * (CLOCK_MONOTONIC, absolute deadlines, nanoseconds) armed for the earliest pending delivery;
 * Go's and Python's timers round to a millisecond, too coarse for sub-millisecond round trips.
 * Because the delay is the same for every chunk, chunks come due in the order they were read:
 * one FIFO (the timeline) of all connections is enough, no heap needed. The timer is armed early
 * by its own typical lateness (learnt as it runs), so deliveries are on time on average; what
 * remains is the proxy's hop itself (the wake-up before each read), as with --delay-us 0.
 *
 * Per connection and direction, order is kept, partial writes wait for EPOLLOUT, a half-close
 * (EOF) is forwarded as shutdown(SHUT_WR) after the data before it, and a reset or error closes
 * the other side after the data before it. A side whose peer has more than MAX_PENDING bytes on
 * their way is not read until they drain (the kernel's buffers then push back on the sender).
 * A stopped upstream is simply silent: nothing here times out. Prints only errors; SIGTERM ends it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

#define MAX_PENDING (4u << 20) /* bytes on their way to one side before its peer is not read */
#define READ_SIZE (64u << 10)
#define MAX_IOV 64

enum kind { K_LISTENER, K_TIMER, K_SIDE };
enum chunk_kind { C_DATA, C_EOF, C_RESET };

struct conn;

struct chunk {
    struct chunk *next; /* in the timeline, then in the destination's out queue */
    struct conn *conn;
    uint64_t due;       /* CLOCK_MONOTONIC, ns */
    int to;             /* index of the destination side */
    int kind;
    size_t len, off;
    char data[];
};

struct side {
    int kind; /* K_SIDE; first, for the epoll dispatch */
    int fd;   /* -1 once closed */
    int idx;  /* 0 client, 1 upstream */
    struct conn *conn;
    uint32_t events;  /* what epoll watches now */
    bool read_eof;    /* read 0: nothing more to read */
    bool wr_shut;     /* the peer's EOF was forwarded: nothing more to write */
    bool paused;      /* not read: too much on its way to the peer */
    bool dirty;       /* on the flush list of the current timer wake-up */
    struct side *next_dirty;
    struct chunk *out, *out_tail; /* due, not yet (fully) written */
    size_t pending;               /* bytes on their way here: timeline and out queue */
};

struct conn {
    struct side s[2];
    bool connecting; /* the upstream's non-blocking connect is under way */
    bool dead;       /* both sides closed */
    bool freeing;
    int refs;        /* chunks of it still in the timeline */
    struct conn *next_free;
};

struct route {
    int kind; /* K_LISTENER */
    int fd;
    struct sockaddr_storage up;
    socklen_t up_len;
    const char *spec;
    uint64_t last_error_log;
};

static int ep, tfd;
static int timer_kind = K_TIMER;
static uint64_t delay_ns;
/* A timer wakes us some tens of µs after its deadline on a VM (the CPU leaves its idle state).
 * The timer is armed that much early (early_ns, learnt from past wake-ups) and each wake-up
 * delivers what is due by now + early_ns, so that chunks leave on time, not late, on average. */
static uint64_t early_ns, armed_for;
static bool armed_ahead; /* armed for a deadline still ahead: its lateness is a fair sample */
static struct chunk *timeline, *timeline_tail;
static struct side *dirty;
static struct conn *graveyard;
static char buf[READ_SIZE];

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("delay-proxy: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct side *peer(struct side *s) { return &s->conn->s[!s->idx]; }

/* Tells epoll what the side waits for: reading unless at EOF or paused, writing while something
 * is stuck in its out queue or its connect is under way. */
static void update_events(struct side *s)
{
    uint32_t ev = 0;
    if (s->fd < 0)
        return;
    if (!s->read_eof && !s->paused)
        ev |= EPOLLIN;
    if (s->out || (s->idx == 1 && s->conn->connecting))
        ev |= EPOLLOUT;
    if (ev == s->events)
        return;
    struct epoll_event e = {.events = ev, .data.ptr = s};
    if (epoll_ctl(ep, EPOLL_CTL_MOD, s->fd, &e) < 0)
        die("epoll_ctl: %s", strerror(errno));
    s->events = ev;
}

static void arm_timer(uint64_t due)
{
    uint64_t at = due - early_ns;
    armed_for = at;
    armed_ahead = at > now_ns();
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(at / 1000000000u), .tv_nsec = (long)(at % 1000000000u)}};
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0)
        die("timerfd_settime: %s", strerror(errno));
}

static void maybe_free(struct conn *c)
{
    /* Freed at the end of the loop's turn: later events of the same epoll_wait may point at it. */
    if (c->dead && c->refs == 0 && !c->freeing) {
        c->freeing = true;
        c->next_free = graveyard;
        graveyard = c;
    }
}

static void free_queue(struct chunk *ch)
{
    while (ch) {
        struct chunk *next = ch->next;
        free(ch);
        ch = next;
    }
}

/* Closes one side; with abort, as a reset (RST) when nothing written is still unsent, so that a
 * reset reaches the other end as one, but never at the cost of data already accepted. */
static void close_side(struct side *s, bool abort)
{
    int unsent = 0;
    if (s->fd < 0)
        return;
    if (abort && ioctl(s->fd, SIOCOUTQ, &unsent) == 0 && unsent == 0) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    close(s->fd); /* also leaves the epoll set */
    s->fd = -1;
    free_queue(s->out);
    s->out = s->out_tail = NULL;
    s->pending = 0;
    struct side *p = peer(s);
    if (p->paused) { /* what it sends now is dropped: no reason to hold it back */
        p->paused = false;
        update_events(p);
    }
    if (p->fd < 0) {
        s->conn->dead = true;
        maybe_free(s->conn);
    }
}

static void flush(struct side *s);

/* A due chunk joins its destination's out queue (dropped if that side is gone). */
static void deliver(struct chunk *ch)
{
    struct side *d = &ch->conn->s[ch->to];
    if (d->fd < 0) {
        free(ch);
        return;
    }
    ch->next = NULL;
    if (d->out_tail)
        d->out_tail->next = ch;
    else
        d->out = ch;
    d->out_tail = ch;
    if (!d->dirty) {
        d->dirty = true;
        d->next_dirty = dirty;
        dirty = d;
    }
}

static void flush_dirty(void)
{
    while (dirty) {
        struct side *s = dirty;
        dirty = s->next_dirty;
        s->dirty = false;
        flush(s);
    }
}

/* Schedules data (or an EOF / reset) read from one side for the other, delay_ns from now. */
static void enqueue(struct conn *c, int to, int kind, const char *data, size_t len)
{
    struct side *d = &c->s[to];
    if (d->fd < 0)
        return;
    struct chunk *ch = malloc(sizeof *ch + len);
    if (!ch)
        die("out of memory");
    ch->next = NULL;
    ch->conn = c;
    ch->due = now_ns() + delay_ns;
    ch->to = to;
    ch->kind = kind;
    ch->len = len;
    ch->off = 0;
    if (len)
        memcpy(ch->data, data, len);
    d->pending += len;
    if (delay_ns == 0 && !timeline) { /* no delay: straight through, no timer round */
        deliver(ch);
        flush_dirty();
        return;
    }
    c->refs++;
    if (timeline_tail)
        timeline_tail->next = ch;
    else {
        timeline = ch;
        arm_timer(ch->due); /* the first pending chunk is the earliest */
    }
    timeline_tail = ch;
}

/* The side is broken (reset, error, refused connect): it is closed, what was on its way to it is
 * dropped, and its peer is reset after the data already on its way there. */
static void fail(struct side *s)
{
    struct conn *c = s->conn;
    close_side(s, false);
    enqueue(c, !s->idx, C_RESET, NULL, 0);
}

/* Writes the side's due chunks (consecutive data in one sendmsg), then its EOF or reset. */
static void flush(struct side *s)
{
    struct conn *c = s->conn;
    while (s->fd >= 0 && s->out && !(s->idx == 1 && c->connecting)) {
        struct chunk *ch = s->out;
        if (ch->kind == C_EOF) {
            s->out = ch->next;
            free(ch);
            shutdown(s->fd, SHUT_WR);
            s->wr_shut = true;
            if (s->read_eof)
                close_side(s, false); /* both directions done */
            continue;
        }
        if (ch->kind == C_RESET) {
            close_side(s, true); /* the peer is already closed: the connection ends */
            break;
        }
        struct iovec iov[MAX_IOV];
        int n = 0;
        size_t want = 0;
        for (struct chunk *x = ch; x && x->kind == C_DATA && n < MAX_IOV; x = x->next, n++) {
            iov[n].iov_base = x->data + x->off;
            iov[n].iov_len = x->len - x->off;
            want += iov[n].iov_len;
        }
        struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(s->fd, &msg, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break; /* EPOLLOUT brings us back */
            if (errno == EINTR)
                continue;
            fail(s);
            return;
        }
        s->pending -= (size_t)w;
        bool full = (size_t)w < want;
        while (w > 0) { /* drop what was written; a partial chunk keeps its offset */
            size_t left = s->out->len - s->out->off;
            if ((size_t)w < left) {
                s->out->off += (size_t)w;
                break;
            }
            w -= (ssize_t)left;
            struct chunk *done = s->out;
            s->out = done->next;
            free(done);
        }
        if (full)
            break; /* the socket's buffer is full: EPOLLOUT brings us back */
    }
    if (!s->out)
        s->out_tail = NULL;
    struct side *p = peer(s);
    if (p->paused && s->pending <= MAX_PENDING / 2) {
        p->paused = false;
        update_events(p);
    }
    update_events(s);
}

static void on_read(struct side *s)
{
    ssize_t n = read(s->fd, buf, sizeof buf);
    if (n > 0) {
        enqueue(s->conn, !s->idx, C_DATA, buf, (size_t)n);
        if (s->fd >= 0 && peer(s)->pending > MAX_PENDING) {
            s->paused = true;
            update_events(s);
        }
    } else if (n == 0) {
        s->read_eof = true;
        enqueue(s->conn, !s->idx, C_EOF, NULL, 0);
        if (s->wr_shut)
            close_side(s, false);
        else
            update_events(s);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        fail(s);
    }
}

static void on_side(struct side *s, uint32_t ev)
{
    struct conn *c = s->conn;
    if (s->fd < 0)
        return; /* closed earlier in this turn of the loop */
    if (s->idx == 1 && c->connecting) {
        if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        int err = 0;
        socklen_t len = sizeof err;
        getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) { /* refused: the client is reset, after the delay the refusal would take */
            c->connecting = false;
            fail(s);
            return;
        }
        c->connecting = false;
        flush(s); /* what the client sent meanwhile */
        return;
    }
    if (!s->read_eof && ((ev & EPOLLIN && !s->paused) || ev & (EPOLLERR | EPOLLHUP)))
        on_read(s); /* an error or hang-up also shows up as a read's result */
    else if (ev & (EPOLLERR | EPOLLHUP))
        fail(s); /* nothing to read, still something to write: a reset */
    if (s->fd >= 0 && ev & EPOLLOUT)
        flush(s);
}

static void on_timer(void)
{
    uint64_t expirations;
    bool fired = read(tfd, &expirations, sizeof expirations) > 0;
    if (!fired && errno != EAGAIN)
        die("timerfd read: %s", strerror(errno));
    uint64_t now = now_ns();
    if (fired && armed_ahead) {
        /* 1 µs towards each wake-up's lateness: early_ns settles at their median. Never more
         * than half the delay, so that a busy machine's long stalls cannot make us early. */
        if (now - armed_for > early_ns && early_ns + 1000 <= delay_ns / 2)
            early_ns += 1000;
        else if (now - armed_for < early_ns && early_ns >= 1000)
            early_ns -= 1000;
    }
    /* Everything due goes out in this wake-up; each destination is written once. */
    while (timeline && timeline->due <= now + early_ns) {
        struct chunk *ch = timeline;
        timeline = ch->next;
        struct conn *c = ch->conn;
        c->refs--;
        deliver(ch);
        maybe_free(c);
    }
    if (!timeline)
        timeline_tail = NULL;
    flush_dirty(); /* may enqueue resets (a write failed), which rearm the timer if first */
    if (timeline)
        arm_timer(timeline->due);
}

static void set_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void add_fd(int fd, uint32_t ev, void *ptr)
{
    struct epoll_event e = {.events = ev, .data.ptr = ptr};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) < 0)
        die("epoll_ctl: %s", strerror(errno));
}

static void on_accept(struct route *r)
{
    for (;;) {
        int cfd = accept4(r->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                fprintf(stderr, "delay-proxy: accept on %s: %s\n", r->spec, strerror(errno));
            return;
        }
        int ufd = socket(r->up.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (ufd < 0) {
            fprintf(stderr, "delay-proxy: socket: %s\n", strerror(errno));
            close(cfd);
            continue;
        }
        set_nodelay(cfd);
        set_nodelay(ufd);
        bool connecting = false;
        if (connect(ufd, (struct sockaddr *)&r->up, r->up_len) < 0) {
            if (errno == EINPROGRESS)
                connecting = true;
            else {
                uint64_t now = now_ns();
                if (now - r->last_error_log > 1000000000u) { /* at most one line a second */
                    fprintf(stderr, "delay-proxy: %s: connect: %s\n", r->spec, strerror(errno));
                    r->last_error_log = now;
                }
                struct linger l = {.l_onoff = 1, .l_linger = 0};
                setsockopt(cfd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
                close(cfd);
                close(ufd);
                continue;
            }
        }
        struct conn *c = calloc(1, sizeof *c);
        if (!c)
            die("out of memory");
        c->connecting = connecting;
        for (int i = 0; i < 2; i++) {
            c->s[i].kind = K_SIDE;
            c->s[i].idx = i;
            c->s[i].conn = c;
        }
        c->s[0].fd = cfd;
        c->s[1].fd = ufd;
        c->s[0].events = EPOLLIN;
        c->s[1].events = connecting ? EPOLLIN | EPOLLOUT : EPOLLIN;
        add_fd(cfd, c->s[0].events, &c->s[0]);
        add_fd(ufd, c->s[1].events, &c->s[1]);
    }
}

/* LISTEN_PORT:HOST:PORT, HOST may be [v6]. Resolves the upstream once and listens. */
static void add_route(struct route *r, const char *spec)
{
    char copy[512], *host, *port;
    r->kind = K_LISTENER;
    r->spec = spec;
    if (strlen(spec) >= sizeof copy)
        die("route too long: %s", spec);
    strcpy(copy, spec);
    char *colon = strchr(copy, ':');
    port = strrchr(copy, ':');
    if (!colon || colon == port)
        die("bad route %s (LISTEN_PORT:UPSTREAM_HOST:UPSTREAM_PORT)", spec);
    *colon = '\0';
    *port++ = '\0';
    host = colon + 1;
    if (*host == '[' && host[strlen(host) - 1] == ']') {
        host++;
        host[strlen(host) - 1] = '\0';
    }
    char *end;
    long listen_port = strtol(copy, &end, 10);
    if (*end || listen_port <= 0 || listen_port > 65535)
        die("bad listen port in route %s", spec);

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    int rc = getaddrinfo(host, port, &hints, &ai);
    if (rc)
        die("route %s: %s", spec, gai_strerror(rc));
    memcpy(&r->up, ai->ai_addr, ai->ai_addrlen);
    r->up_len = ai->ai_addrlen;
    freeaddrinfo(ai);

    r->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (r->fd < 0)
        die("socket: %s", strerror(errno));
    int one = 1;
    setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)listen_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(r->fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("listen on 127.0.0.1:%ld: %s", listen_port, strerror(errno));
    if (listen(r->fd, 4096) < 0)
        die("listen: %s", strerror(errno));
    add_fd(r->fd, EPOLLIN, r);
}

static void usage(void)
{
    fprintf(stderr, "usage: delay-proxy --delay-us N --route LISTEN_PORT:UPSTREAM_HOST:UPSTREAM_PORT [--route ...]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    double delay_us = -1;
    int nroutes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--route") && i + 1 < argc)
            nroutes++, i++;
        else if (!strcmp(argv[i], "--delay-us") && i + 1 < argc) {
            char *end;
            delay_us = strtod(argv[++i], &end);
            if (*end || delay_us < 0 || delay_us > 60e6)
                die("bad --delay-us %s", argv[i]);
        } else
            usage();
    }
    if (delay_us < 0 || nroutes == 0)
        usage();
    delay_ns = (uint64_t)(delay_us * 1000 + 0.5);

    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_TIMERSLACK, 1UL); /* no timer slack on our wake-ups */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* two descriptors per connection */
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    ep = epoll_create1(EPOLL_CLOEXEC);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (ep < 0 || tfd < 0)
        die("epoll/timerfd: %s", strerror(errno));
    add_fd(tfd, EPOLLIN, &timer_kind);
    struct route *routes = calloc((size_t)nroutes, sizeof *routes);
    if (!routes)
        die("out of memory");
    for (int i = 1, r = 0; i < argc; i += 2)
        if (!strcmp(argv[i], "--route"))
            add_route(&routes[r++], argv[i + 1]);

    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_wait: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++) {
            int kind = *(int *)evs[i].data.ptr;
            if (kind == K_TIMER)
                on_timer();
            else if (kind == K_LISTENER)
                on_accept(evs[i].data.ptr);
            else
                on_side(evs[i].data.ptr, evs[i].events);
        }
        while (graveyard) {
            struct conn *c = graveyard;
            graveyard = c->next_free;
            free(c);
        }
    }
}
