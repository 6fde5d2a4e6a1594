"""tests/chaos/verdicts.py — the verdict workload of tests/chaos/chaos.py
(--workload verdicts; docs/operations.md, "The verdict workload"): the
consume verdict, ticket rotation and family revocation racing across a
failover, and the checker that judges them from the history and from the
store's tables.

Three kinds of driver threads, each at both serve instances:

  consume  issues a grant, then races 2-5 copies of its consume
           (POST /v1/grants/consume, the same token), one race in four
           with a revocation of the grant (POST /v1/grants/revoke) as one
           of the copies — at most one may ever answer consumed: true or
           revoked: true;
  chain    creates a ticket in a family of its own and rotates it along a
           chain (POST /v1/tickets/rotate); one step in five races 2-4
           copies of the same ticket (at most one 200; the losers' replay
           revokes the family, and the chain starts over in a new family);
  family   issues 2-5 grants and a ticket into a new family, then races
           their consumes, a rotation chain of the ticket and 1-2
           revocations of the family (POST /v1/families/{family}/revoke);
           once a revocation is acknowledged, it tries a new grant, the
           remaining consumes and a rotation in that family: all refused.

Every request is recorded as invoke / ok / fail / info; an ambiguous one
(info) is retried — the same token, the same ticket, the same family —
until a definite answer, as a client must. Tickets are recorded by their
SHA-256 (the store's ticket_hash), never as text.
"""

import hashlib
import http.client
import random
import threading
import time
import uuid

# History functions (f) of this workload; the checker's own requests carry
# resolve: true (its retries of ambiguous requests) or probe: true.
FUNCS = ("consume", "grevoke", "rotate", "frevoke", "vissue", "tcreate")


def ticket_hash(ticket):
    """The store's tickets.ticket_hash (lib/store/grants.c): SHA-256 hex."""
    return hashlib.sha256(ticket.encode()).hexdigest()


def is_write_ack(ev):
    """An acknowledged write of this workload: a consume that spent its
    grant, a rotation, a grant or a ticket created."""
    return ev["type"] == "ok" and bool(ev.get("write"))


def _classify(f, st, doc):
    """(type, outcome, extra fields) of an answer to request function f."""
    doc = doc if isinstance(doc, dict) else {}
    if st == 503:
        return "info", "retry_later", {}
    if st is not None and st >= 500:
        return "info", "unexpected_%d" % st, {}
    err = doc.get("error", "")
    if f == "consume":
        if st == 200 and doc.get("consumed") is True:
            return "ok", "consumed", {"write": True}
        if st == 409 and doc.get("consumed") is False and err == "already_consumed":
            return "fail", "already_consumed", {}
    elif f == "grevoke":
        if st == 200 and doc.get("revoked") is True:
            return "ok", "revoked", {"write": True}
        if st == 409 and doc.get("revoked") is False and err == "already_used_or_revoked":
            return "fail", "already_used_or_revoked", {}
    elif f == "rotate":
        if st == 200 and doc.get("ticket"):
            return "ok", "rotated", {"write": True, "new": ticket_hash(doc["ticket"])}
        if st == 409 and err == "ticket_not_found":
            return "fail", "ticket_not_found", {}
    elif f == "frevoke":
        if st == 200 and isinstance(doc.get("revoked"), list):
            return "ok", "revoked", {"revoked": doc["revoked"]}
    elif f in ("vissue", "tcreate"):
        if st == 201:
            extra = {"write": True}
            if f == "vissue":
                extra["grant"] = doc.get("grant_id")
            else:
                extra["ticket"] = ticket_hash(doc.get("ticket", ""))
            return "ok", "created", extra
        if st == 409 and err == "family_revoked":
            return "fail", "family_revoked", {}
    return "fail", "unexpected_%s_%s" % (st, err), {}


class VerdictWorkload:
    """The load: `threads` drivers, a third of each kind."""

    def __init__(self, hist, instances, keys, threads, issuer, agent,
                 client_cls, timeout=10.0):
        self.client_cls = client_cls  # chaos.Client
        self.hist = hist
        self.instances = instances
        self.keys = keys            # role -> API key
        self.threads_n = threads
        self.issuer = issuer
        self.agent = agent
        self.timeout = timeout
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.seq = 0
        self.rid = 0
        self.threads = []
        self.live = list(range(len(instances)))
        self.grants = {}            # grant id -> (token, family or None)
        self.tickets = {}           # ticket hash -> (ticket, family)
        self.families = set()       # families this workload made
        self.pending = {}           # intent key -> intent, unsettled

    # ---- requests ---------------------------------------------------------

    def client(self, role):
        return self.client_cls(self.instances, self.keys[role], self.timeout)

    def pick(self, rng):
        live = self.live
        return live[rng.randrange(len(live))]

    def call(self, clients, proc, f, inst, fields, rng=None):
        """One request, recorded; returns (type, doc, retry_after). fields
        name what it acts on (grant, ticket, family, race, ...)."""
        role, method, path, body = self._route(f, fields)
        with self.lock:
            self.rid += 1
            rid = "%s-%d" % (f, self.rid)
        rec = {k: v for k, v in fields.items() if k != "token" and k != "text"}
        self.hist.add(type="invoke", f=f, process=proc, instance=inst, rid=rid, **rec)
        try:
            st, doc, ra = clients[role].request(inst, method, path, body)
        except (OSError, http.client.HTTPException) as e:
            self.hist.add(type="info", f=f, process=proc,
                          instance=inst, rid=rid, error=type(e).__name__,
                          outcome=type(e).__name__, **rec)
            return "info", None, None
        t, outcome, extra = _classify(f, st, doc)
        rec.update(extra)
        self.hist.add(type=t, f=f, process=proc,
                      instance=inst, rid=rid, status=st, outcome=outcome, **rec)
        return t, doc, ra

    def _route(self, f, x):
        if f == "consume":
            return "enforcer", "POST", "/v1/grants/consume", {"token": x["token"]}
        if f == "grevoke":
            return "revoker", "POST", "/v1/grants/revoke", {"token": x["token"]}
        if f == "rotate":
            return "agent", "POST", "/v1/tickets/rotate", {"ticket": x["text"]}
        if f == "frevoke":
            return "revoker", "POST", "/v1/families/%s/revoke" % x["family"], None
        if f == "tcreate":
            return "issuer", "POST", "/v1/tickets", {"family": x["family"]}
        if f == "vissue":
            with self.lock:
                self.seq += 1
                n = self.seq
            body = {"subject": self.agent, "action": "credit.apply",
                    "params": {"account": "V-%d" % n, "amount": "1.00",
                               "currency": "USD"},
                    "ttl_seconds": 3600}
            if x.get("family"):
                body["family"] = x["family"]
            return "issuer", "POST", "/v1/grants", body
        raise ValueError(f)

    def settle(self, clients, proc, f, fields, rng, deadline=None):
        """Repeats a request after every ambiguous answer until a definite
        one; stops at the workload's end (the intent stays pending for the
        checker's resolution) or at deadline. Returns (type, doc)."""
        key = (f, fields.get("grant") or fields.get("ticket") or fields.get("family"),
               fields.get("race"), fields.get("copy"))
        intent = dict(fields, f=f)
        with self.lock:
            self.pending[key] = intent
        while True:
            t, doc, ra = self.call(clients, proc, f, self.pick(rng), fields, rng)
            if t != "info":
                with self.lock:
                    self.pending.pop(key, None)
                return t, doc
            if deadline is None and self.stop.is_set():
                return t, None
            if deadline is not None and time.monotonic() > deadline:
                return t, None
            time.sleep(min(ra or 0.2, 0.5) * (0.5 + rng.random()))

    def new_grant(self, clients, proc, rng, family=None):
        """A grant issued (retried while ambiguous: each try is a new grant,
        an ambiguous one is abandoned). (grant id, token), or None when the
        family is revoked or the load stopped."""
        while not self.stop.is_set():
            t, doc, ra = self.call(clients, proc, "vissue", self.pick(rng),
                                   {"family": family} if family else {})
            if t == "ok":
                with self.lock:
                    self.grants[doc["grant_id"]] = (doc["token"], family)
                return doc["grant_id"], doc["token"]
            if t == "fail":
                return None
            time.sleep(min(ra or 0.2, 0.5) * (0.5 + rng.random()))
        return None

    def new_ticket(self, clients, proc, rng, family):
        while not self.stop.is_set():
            t, doc, ra = self.call(clients, proc, "tcreate", self.pick(rng),
                                   {"family": family})
            if t == "ok":
                h = ticket_hash(doc["ticket"])
                with self.lock:
                    self.tickets[h] = (doc["ticket"], family)
                return doc["ticket"]
            if t == "fail":
                return None
            time.sleep(min(ra or 0.2, 0.5) * (0.5 + rng.random()))
        return None

    def race(self, proc, f, fields, copies, rng, fs=None):
        """copies of one request, released together (a barrier), each at a
        random instance, each settled on its own; fs, when given, names
        each copy's request function instead of f. Returns their (type,
        doc) in copy order."""
        out = [None] * copies
        bar = threading.Barrier(copies)

        def one(i):
            r = random.Random(rng.random())
            cl = {role: self.client(role) for role in ("enforcer", "agent", "revoker")}
            try:
                try:
                    bar.wait(5)
                except threading.BrokenBarrierError:
                    pass
                out[i] = self.settle(cl, "%s.%d" % (proc, i), fs[i] if fs else f,
                                     dict(fields, copy=i), r)
            finally:
                for c in cl.values():
                    c.close()
        ths = [threading.Thread(target=one, args=(i,), daemon=True)
               for i in range(1, copies)]
        for th in ths:
            th.start()
        one(0)
        for th in ths:
            th.join()
        return out

    def _rotate_ticket(self, proc, ticket, family, copies, rng, race_id):
        """Rotates ticket (copies racing); the new ticket of the one that
        won, or None (refused, or still ambiguous)."""
        res = self.race(proc, "rotate", {"ticket": ticket_hash(ticket), "text": ticket,
                                          "family": family, "race": race_id},
                        copies, rng)
        new = None
        for t, doc in res:
            if t == "ok" and doc and doc.get("ticket"):
                new = doc["ticket"]
                with self.lock:
                    self.tickets[ticket_hash(new)] = (new, family)
        return new

    # ---- drivers ----------------------------------------------------------

    def consume_driver(self, proc, rng, cl):
        while not self.stop.is_set():
            g = self.new_grant(cl, proc, rng)
            if g is None:
                continue
            gid, token = g
            n = rng.randint(2, 5)
            # One race in four has a revocation of the grant among its
            # copies (POST /v1/grants/revoke): one decision per grant.
            fs = ["consume"] * n
            if rng.random() < 0.25:
                fs[rng.randrange(n)] = "grevoke"
            self.race(proc, "consume", {"grant": gid, "token": token,
                                         "race": str(uuid.uuid4())[:8]},
                      n, rng, fs)

    def chain_driver(self, proc, rng, cl):
        while not self.stop.is_set():
            fam = "vc-" + uuid.uuid4().hex[:16]
            with self.lock:
                self.families.add(fam)
            ticket = self.new_ticket(cl, proc, rng, fam)
            while ticket is not None and not self.stop.is_set():
                racing = rng.random() < 0.2
                ticket = self._rotate_ticket(proc, ticket, fam,
                                             rng.randint(2, 4) if racing else 1,
                                             rng, str(uuid.uuid4())[:8])
                if racing:
                    break  # the losers' replay revoked the family
                time.sleep(rng.random() * 0.05)

    def family_driver(self, proc, rng, cl):
        while not self.stop.is_set():
            fam = "vf-" + uuid.uuid4().hex[:16]
            with self.lock:
                self.families.add(fam)
            grants = []
            for _ in range(rng.randint(2, 5)):
                g = self.new_grant(cl, proc, rng, fam)
                if g is not None:
                    grants.append(g)
            ticket = self.new_ticket(cl, proc, rng, fam)
            if self.stop.is_set():
                return
            state = {"ticket": ticket, "revoked": False}

            def consumer(gid, token):
                r = random.Random(rng.random())
                c = {"enforcer": self.client("enforcer")}
                try:
                    self.settle(c, proc + ".c", "consume",
                                {"grant": gid, "token": token, "family": fam}, r)
                finally:
                    c["enforcer"].close()

            def rotator():
                r = random.Random(rng.random())
                while state["ticket"] is not None and not state["revoked"] \
                        and not self.stop.is_set():
                    state["ticket"] = self._rotate_ticket(
                        proc + ".r", state["ticket"], fam, 1, r, None)
                    time.sleep(r.random() * 0.02)

            def revoker():
                time.sleep(rng.random() * 0.1)
                res = self.race(proc + ".v", "frevoke", {"family": fam, "race": str(uuid.uuid4())[:8]},
                                rng.randint(1, 2), rng)
                if any(t == "ok" for t, _ in res):
                    state["revoked"] = True
            ths = [threading.Thread(target=consumer, args=g, daemon=True) for g in grants]
            ths.append(threading.Thread(target=rotator, daemon=True))
            ths.append(threading.Thread(target=revoker, daemon=True))
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            if not state["revoked"] or self.stop.is_set():
                continue
            # After the acknowledged revocation: all refused.
            self.new_grant(cl, proc, rng, fam)
            for gid, token in grants:
                self.settle(cl, proc, "consume", {"grant": gid, "token": token,
                                                  "family": fam}, rng)
            t = self.tickets_of_family_latest(fam)
            if t is not None:
                self.settle(cl, proc, "rotate", {"ticket": ticket_hash(t), "text": t,
                                                 "family": fam}, rng)

    def tickets_of_family_latest(self, fam):
        """The family's newest acknowledged ticket (a chain head)."""
        latest = None
        with self.lock:
            for h, (text, f) in self.tickets.items():
                if f == fam:
                    latest = text
        return latest

    def driver(self, n):
        proc = "v%d" % n
        rng = random.Random(n * 104729 + int(time.time()))
        cl = {role: self.client(role) for role in ("issuer", "agent", "enforcer", "revoker")}
        try:
            (self.consume_driver, self.chain_driver, self.family_driver)[n % 3](proc, rng, cl)
        finally:
            for c in cl.values():
                c.close()

    def start(self):
        for n in range(self.threads_n):
            th = threading.Thread(target=self.driver, args=(n,), daemon=True)
            th.start()
            self.threads.append(th)

    def finish(self):
        self.stop.set()
        for th in self.threads:
            th.join(self.timeout * 4 + 10)


# ---- the checker -------------------------------------------------------------

def run_pool(items, fn, n, make, close):
    """Runs fn(clients, rng, item) over items on n threads; each thread's
    clients are make(), closed by close(clients) at its end."""
    idx = [0]
    lk = threading.Lock()

    def worker(w):
        cl = make()
        rng = random.Random(w)
        try:
            while True:
                with lk:
                    if idx[0] >= len(items):
                        return
                    it = items[idx[0]]
                    idx[0] += 1
                fn(cl, rng, it)
        finally:
            close(cl)
    ths = [threading.Thread(target=worker, args=(w,), daemon=True)
           for w in range(min(n, max(1, len(items))))]
    for th in ths:
        th.start()
    for th in ths:
        th.join()


def _pool(work, items, fn, n):
    run_pool(items, fn, n, lambda: {role: work.client(role) for role in work.keys},
             lambda cl: [c.close() for c in cl.values()])


def read_verdict_store(url, psql, issuer):
    """The store's record (lib/store/postgres/schema.c, readable keys):
    each grant's claim kind in grant_consumptions ('consume', 'revocation',
    'admission'), each family's revocation mark, each ticket's family and
    rotation mark."""
    claims = {g: k for g, k in psql(url, "SELECT grant_id, kind FROM grant_consumptions "
                                          "WHERE issuer = '%s'" % issuer)}
    fams = {f: r == "t" for f, r in psql(url, "SELECT family, revoked_at IS NOT NULL "
                                              "FROM families WHERE issuer = '%s'" % issuer)}
    tickets = {h: (f, r == "t") for h, f, r in psql(
        url, "SELECT ticket_hash, family, rotated_at IS NOT NULL FROM tickets "
             "WHERE issuer = '%s'" % issuer)}
    return claims, fams, tickets


class _Attempt:
    __slots__ = ("rid", "type", "t_inv", "t_ans", "probe", "ev")

    def __init__(self, rid, t_inv):
        self.rid, self.t_inv = rid, t_inv
        self.type, self.t_ans, self.probe, self.ev = None, None, False, None


def _attempts(events):
    """Every answered request of this workload, by rid, with its invoke
    time."""
    inv, out = {}, []
    for ev in events:
        if ev.get("f") not in FUNCS or "rid" not in ev:
            continue
        if ev["type"] == "invoke":
            inv[ev["rid"]] = ev["time"]
            continue
        a = _Attempt(ev["rid"], inv.get(ev["rid"], ev["time"]))
        a.type, a.t_ans, a.probe, a.ev = ev["type"], ev["time"], bool(ev.get("probe")), ev
        out.append(a)
    return out


def _held_before(oks, infos, stored, t):
    """Whether a refusal answered at t is explained by the attempt whose
    commit holds the grant or ticket: the one that answered 200, else (the
    store showing it spent) an ambiguous one — invoked before t. A commit
    invoked after the refusal cannot explain it: the refusal was read from
    a row the failover then discarded."""
    if oks:
        return min(a.t_inv for a in oks) < t
    return bool(infos) and stored and min(a.t_inv for a in infos) < t


def check_verdicts(work, url, psql, issuer, resolve_seconds=60.0, threads=32,
                   probe_seconds=180.0):
    """The verdict of a finished verdict load (docs/operations.md, "What the
    verdict checker verifies"). The store must be back. Resolves the
    ambiguous requests, reads the store, probes, then counts per kind
    (consume, rotate, family): lost, duplicated, unresolved, wrongly
    refused, spent by an ambiguous attempt."""
    hist = work.hist
    # 1. Every request still ambiguous, retried as a client would (the same
    #    token, ticket or family) until definite, for resolve_seconds.
    deadline = time.monotonic() + resolve_seconds
    intents = list(work.pending.values())
    work.stop.clear()

    def resolve(cl, rng, it):
        fields = {k: v for k, v in it.items() if k != "f"}
        fields["resolve"] = True
        work.settle(cl, "resolver", it["f"], fields, rng, deadline=deadline)
    _pool(work, intents, resolve, threads)

    # 2. The store, before any probe.
    claims, fams, tstore = read_verdict_store(url, psql, issuer)

    def index(atts):
        by_grant, by_ticket, by_fam = {}, {}, {}
        for a in atts:
            f, ev = a.ev["f"], a.ev
            if f in ("consume", "grevoke"):
                by_grant.setdefault(ev["grant"], []).append(a)
            elif f == "rotate":
                by_ticket.setdefault(ev["ticket"], []).append(a)
            if ev.get("family"):
                by_fam.setdefault(ev["family"], []).append(a)
        return by_grant, by_ticket, by_fam

    with work.lock:
        grant_fam = {g: fam for g, (_, fam) in work.grants.items()}
        ticket_fam = {h: fam for h, (_, fam) in work.tickets.items()}
        ticket_text = {h: text for h, (text, _) in work.tickets.items()}
        grant_tok = {g: tok for g, (tok, _) in work.grants.items()}

    def revocation_signals(by_grant, by_ticket, by_fam):
        """Per family: the invoke times of requests that may have revoked
        it (a family revocation; a replay: a rotation attempt that did not
        win on a ticket presented more than once), and the acknowledgment
        time (the first answer that says it is revoked: a family
        revocation's 200, a rotation's 409 for a ticket the store holds —
        a replay revokes, a revoked family refuses —, a grant or ticket
        refused family_revoked)."""
        tried, acked = {}, {}
        for fam, atts in by_fam.items():
            for a in atts:
                f = a.ev["f"]
                if f == "frevoke":
                    tried.setdefault(fam, []).append(a.t_inv)
                    if a.type == "ok":
                        acked[fam] = min(acked.get(fam, a.t_ans), a.t_ans)
                elif f in ("vissue", "tcreate") and a.type == "fail" \
                        and a.ev.get("outcome") == "family_revoked":
                    acked[fam] = min(acked.get(fam, a.t_ans), a.t_ans)
        for h, atts in by_ticket.items():
            fam = ticket_fam.get(h) or atts[0].ev.get("family")
            if len(atts) > 1:
                for a in atts:
                    if a.type != "ok":
                        tried.setdefault(fam, []).append((a.t_inv, h))
            for a in atts:
                if a.type == "fail" and a.ev.get("outcome") == "ticket_not_found" \
                        and h in tstore:
                    acked[fam] = min(acked.get(fam, a.t_ans), a.t_ans)
        return tried, acked

    atts = _attempts(hist.events)
    by_grant, by_ticket, by_fam = index(atts)
    tried, acked = revocation_signals(by_grant, by_ticket, by_fam)

    def fam_tried_before(fam, t, not_ticket=None):
        for x in tried.get(fam, []):
            if isinstance(x, tuple):
                if x[1] != not_ticket and x[0] < t:
                    return True
            elif x < t:
                return True
        return False

    # 3. Probes, after the store was read: every grant spent or in a
    #    family whose revocation was acknowledged is consumed again (must
    #    be refused); a new grant is issued into every such family (must be
    #    refused family_revoked); every chain head (an acknowledged ticket
    #    never presented) is rotated (must rotate, unless its family was
    #    revoked).
    presented = set(by_ticket)
    probes = []
    for g, a in by_grant.items():
        if g in grant_tok and (any(x.type == "ok" for x in a) or grant_fam.get(g) in acked):
            probes.append(("consume", {"grant": g, "token": grant_tok[g],
                                       "family": grant_fam.get(g), "probe": True}))
    for fam in acked:
        probes.append(("vissue", {"family": fam, "probe": True}))
    for h, fam in ticket_fam.items():
        if h not in presented:
            probes.append(("rotate", {"ticket": h, "text": ticket_text[h],
                                      "family": fam, "probe": True}))
    # A store that never comes back must not hold the checker for a
    # probe's 20 s each: after probe_seconds the rest are left unanswered
    # (pending: unresolved, the verdict fails).
    probe_end = time.monotonic() + probe_seconds

    def probe(cl, rng, it):
        if time.monotonic() > probe_end:
            with work.lock:
                work.pending[("probe",) + tuple(sorted(it[1].items()))] = dict(it[1], f=it[0])
            return
        work.settle(cl, "prober", it[0], it[1], rng,
                    deadline=min(time.monotonic() + 20, probe_end))
    work.stop.clear()
    _pool(work, probes, probe, threads)
    work.stop.set()
    unresolved = {"consume": [], "rotate": [], "family": []}
    for it in work.pending.values():
        kind = {"consume": "consume", "grevoke": "consume",
                "rotate": "rotate"}.get(it["f"], "family")
        unresolved[kind].append(it.get("grant") or it.get("ticket") or it.get("family"))

    atts = _attempts(hist.events)
    by_grant, by_ticket, by_fam = index(atts)
    res = {k: {"lost": {}, "duplicated": [], "wrongly_refused": [],
               "spent_by_ambiguous": [], "unresolved": unresolved[k],
               "acknowledged": 0} for k in ("consume", "rotate", "family")}
    revlisted = {}
    for fam, lst in by_fam.items():
        for a in lst:
            if a.ev["f"] == "frevoke" and a.type == "ok":
                for g in a.ev.get("revoked", []):
                    revlisted[g] = fam

    # Consume, and the revocation of one grant racing it: one decision per
    # grant (a consume's consumed: true, or a revocation's revoked: true).
    r = res["consume"]
    for g, lst in by_grant.items():
        oks = [a for a in lst if a.type == "ok"]
        infos = [a for a in lst if a.type == "info" and not a.probe]
        fam = grant_fam.get(g)
        mine = [a for a in oks if not a.probe]
        if mine:
            r["acknowledged"] += 1
        if len(oks) > 1:
            r["duplicated"].append(g)
        want = {"consume": "consume", "grevoke": "revocation"}
        for a in mine:
            if claims.get(g) != want[a.ev["f"]]:
                r["lost"][g] = "acknowledged %s; the store's claim: %s" % (
                    a.ev["f"], claims.get(g))
        if g not in r["lost"] and mine and any(a.probe for a in oks):
            r["lost"][g] = "acknowledged %s; a later consume won" % mine[0].ev["f"]
        if not oks and infos and claims.get(g) in ("consume", "revocation"):
            r["spent_by_ambiguous"].append(g)
        for a in lst:
            if a.type != "fail":
                continue
            ok = _held_before(oks, infos, claims.get(g) in ("consume", "revocation"),
                              a.t_ans) or \
                (fam is not None and fam_tried_before(fam, a.t_ans))
            if not ok:
                r["wrongly_refused"].append(g)
                break

    # Rotation.
    r = res["rotate"]
    acked_tickets = set()
    for ev in hist.events:
        if ev["type"] == "ok" and ev.get("f") == "tcreate":
            acked_tickets.add(ev["ticket"])
        elif ev["type"] == "ok" and ev.get("f") == "rotate" and not ev.get("probe"):
            acked_tickets.add(ev["new"])
    for h in acked_tickets:
        if h not in tstore:
            r["lost"][h] = "an acknowledged ticket the store does not hold"
    for h, lst in by_ticket.items():
        oks = [a for a in lst if a.type == "ok"]
        infos = [a for a in lst if a.type == "info" and not a.probe]
        fam = ticket_fam.get(h) or lst[0].ev.get("family")
        if any(not a.probe for a in oks):
            r["acknowledged"] += 1
        if len(oks) > 1:
            r["duplicated"].append(h)
        if any(not a.probe for a in oks) and not tstore.get(h, (None, False))[1]:
            r["lost"].setdefault(h, "an acknowledged rotation; the store's ticket is not rotated")
        if not oks and infos and tstore.get(h, (None, False))[1]:
            r["spent_by_ambiguous"].append(h)
        for a in lst:
            if a.type != "fail":
                continue
            ok = _held_before(oks, infos, tstore.get(h, (None, False))[1], a.t_ans) or \
                fam_tried_before(fam, a.t_ans, not_ticket=h)
            if a.probe and not ok:
                r["lost"].setdefault(h, "a chain head (acknowledged, never presented) "
                                        "refused after the failover in a family "
                                        "nothing revoked")
            elif not ok:
                r["wrongly_refused"].append(h)
                break

    # Family revocation.
    r = res["family"]
    for fam, t_ack in acked.items():
        r["acknowledged"] += 1
        if not fams.get(fam):
            r["lost"][fam] = "acknowledged revoked at %.2f s; the store's family is live" % t_ack
        for a in by_fam.get(fam, []):
            if a.type == "ok" and a.ev["f"] in ("consume", "rotate", "vissue") \
                    and a.t_inv > t_ack:
                r["lost"].setdefault(fam, "acknowledged revoked at %.2f s; a %s invoked at "
                                          "%.2f s succeeded%s" % (
                                              t_ack, a.ev["f"], a.t_inv,
                                              " (the checker's probe)" if a.probe else ""))
    for g, fam in revlisted.items():
        if any(a.type == "ok" for a in by_grant.get(g, [])):
            r["duplicated"].append(g)  # revoked and consumed: two decisions
        if claims.get(g) != "revocation":
            r["lost"].setdefault(fam, "grant %s listed revoked; the store's claim: %s"
                                 % (g, claims.get(g)))
    for fam, lst in by_fam.items():
        for a in lst:
            if a.ev["f"] in ("vissue", "tcreate") and a.type == "fail" \
                    and not fam_tried_before(fam, a.t_ans):
                r["wrongly_refused"].append(fam)
                break

    tot = {}
    for k in ("lost", "duplicated", "unresolved", "wrongly_refused", "spent_by_ambiguous",
              "acknowledged"):
        tot[k] = sum(len(v[k]) if not isinstance(v[k], int) else v[k] for v in res.values())
    tot["by_kind"] = {k: {x: (len(v[x]) if not isinstance(v[x], int) else v[x]) for x in v}
                      for k, v in res.items()}
    tot["ids"] = {k: {x: (dict(list(v[x].items())[:10]) if isinstance(v[x], dict)
                          else v[x][:10]) for x in ("lost", "duplicated", "unresolved",
                                                    "wrongly_refused")}
                  for k, v in res.items()}
    tot["probes"] = len(probes)
    tot["resolved"] = len(intents)
    return tot


def verdict_counts(events):
    """Answers to the load's requests (the checker's resolution included,
    its probes not) by function and outcome."""
    counts = {}
    for ev in events:
        if ev["type"] == "invoke" or ev.get("f") not in FUNCS or ev.get("probe"):
            continue
        key = "%s_%s" % (ev["f"], ev.get("outcome") or ev["type"])
        counts[key] = counts.get(key, 0) + 1
    return counts
