/*
 * races.c — two instances, one store: fifty concurrent admissions,
 * consumes and rotations of one grant or ticket over two instances make
 * exactly one, and what one instance did (or did before a restart) is
 * refused on the other. Each test has its own store and pair of instances
 * (pair_setup).
 */
#include "harness.h"
#include "cases.h"

/* ===========================================================================
 * Two instances, one store: races and restarts
 * ========================================================================= */
static char *admit_body_for(racer *me, const void *arg)
{
    json_t *b = admit_body(me->op, arg);
    char *t = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return t;
}

static char *token_body_for(racer *me, const void *arg)
{
    json_t *b = json_pack("{s:s}", "token", (const char *)arg);
    char *t = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return t;
}

static char *ticket_body_for(racer *me, const void *arg)
{
    json_t *b = json_pack("{s:s}", "ticket", (const char *)arg);
    char *t = json_dumps(b, JSON_COMPACT);
    json_decref(b);
    return t;
}

void fifty_concurrent_admissions_on_two_instances_admit_exactly_one(
    void **state)
{
    pair *p = *state;

    for (int round = 0; round < RACE_ROUNDS; round++) {
        racer rs[RACERS];
        int admitted = 0, refused = 0, winner = -1;
        grant g;

        issue_grant(round % 2 ? p->b : p->a, &g);
        race(rs, RACERS, p->a, p->b, "/v1/operations", KEY(P_AGENT), admit_body_for,
             g.token);
        for (int i = 0; i < RACERS; i++) {
            const hres *r = &rs[i].r;
            const char *e = jstr(r->json, "error"), *o = jstr(r->json, "outcome");
            if (r->status == 202 && o && strcmp(o, "admitted") == 0) {
                admitted++;
                winner = i;
            } else if (r->status == 409 && e &&
                       strcmp(e, "grant_not_available") == 0) {
                refused++;
            }
        }
        if (admitted != 1 || refused != RACERS - 1)
            race_report("admission", round, rs, RACERS);
        assert_int_equal(admitted, 1);
        assert_int_equal(refused, RACERS - 1);
        /* Only the winner's operation exists. */
        for (int i = 0; i < RACERS; i++) {
            char path[128];
            hres r;
            snprintf(path, sizeof path, "/v1/operations/%s", rs[i].op);
            get(&r, i % 2 ? p->a : p->b, path, KEY(P_AGENT));
            if (i == winner) {
                assert_http(&r, 200);
            } else {
                assert_error(&r, 404, "not_found");
            }
            hres_free(&r);
        }
        race_free(rs, RACERS);
    }
}

void grant_admitted_on_one_instance_is_409_on_the_other(void **state)
{
    pair *p = *state;
    char op[OG_UUID_LEN + 1];
    grant g;

    issue_grant(p->a, &g);
    uuid4(op);
    assert_admits(p->a, op, g.token);
    assert_refused(p->b, g.token);
    assert_refused(p->a, g.token);
}

void grant_admitted_before_a_restart_is_409_after_it(void **state)
{
    pair *p = *state;
    char op[OG_UUID_LEN + 1];
    grant g, control;
    hres r;

    issue_grant(p->a, &g);
    issue_grant(p->a, &control);
    uuid4(op);
    assert_admits(p->a, op, g.token);
    assert_int_equal(srv_restart(p->a), 0);
    assert_refused(p->a, g.token);
    /* Control: a grant issued before the restart admits after it. */
    {
        char op2[OG_UUID_LEN + 1];
        uuid4(op2);
        assert_admits(p->a, op2, control.token);
    }
    /* The same operation retried after the restart finds its record. */
    admit(&r, p->a, KEY(P_AGENT), op, g.token);
    assert_http(&r, 202);
    assert_str(jstr(r.json, "outcome"), "already_admitted");
    hres_free(&r);
}

void fifty_concurrent_consumes_on_two_instances_consume_exactly_one(
    void **state)
{
    pair *p = *state;

    for (int round = 0; round < RACE_ROUNDS; round++) {
        racer rs[RACERS];
        int consumed = 0, denied = 0;
        grant g;

        issue_grant(round % 2 ? p->b : p->a, &g);
        race(rs, RACERS, p->a, p->b, "/v1/grants/consume", KEY(P_ENFORCER),
             token_body_for, g.token);
        for (int i = 0; i < RACERS; i++) {
            const hres *r = &rs[i].r;
            const char *e = jstr(r->json, "error");
            json_t *c = json_object_get(r->json, "consumed");
            if (r->status == 200 && json_is_true(c))
                consumed++;
            else if (r->status == 409 && json_is_false(c) && e &&
                     strcmp(e, "already_consumed") == 0)
                denied++;
        }
        if (consumed != 1 || denied != RACERS - 1)
            race_report("consume", round, rs, RACERS);
        assert_int_equal(consumed, 1);
        assert_int_equal(denied, RACERS - 1);
        race_free(rs, RACERS);
        assert_refused(p->b, g.token); /* and it admits nothing */
    }
}

void grant_consumed_on_one_instance_is_409_on_the_other(void **state)
{
    pair *p = *state;
    grant g;
    hres r;

    issue_grant(p->a, &g);
    consume(&r, p->a, g.token);
    assert_http(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "consumed")));
    hres_free(&r);
    consume(&r, p->b, g.token);
    assert_error(&r, 409, "already_consumed");
    assert_true(json_is_false(json_object_get(r.json, "consumed")));
    hres_free(&r);
}

void grant_consumed_before_a_restart_is_409_after_it(void **state)
{
    pair *p = *state;
    grant g, control;
    hres r;

    issue_grant(p->a, &g);
    issue_grant(p->a, &control);
    consume(&r, p->a, g.token);
    assert_http(&r, 200);
    hres_free(&r);
    assert_int_equal(srv_restart(p->a), 0);
    consume(&r, p->a, g.token);
    assert_error(&r, 409, "already_consumed");
    assert_true(json_is_false(json_object_get(r.json, "consumed")));
    hres_free(&r);
    /* Control: a grant issued before the restart is consumed after it. */
    consume(&r, p->a, control.token);
    assert_http(&r, 200);
    assert_true(json_is_true(json_object_get(r.json, "consumed")));
    hres_free(&r);
}

void fifty_concurrent_rotations_of_one_ticket_rotate_exactly_one(
    void **state)
{
    pair *p = *state;

    for (int round = 0; round < RACE_ROUNDS; round++) {
        racer rs[RACERS];
        int rotated = 0, refused = 0;
        char next[128] = "";
        ticket t;

        ticket_new(round % 2 ? p->b : p->a, &t);
        /* Control: the other instance rotates the new ticket, so both see
         * one ticket store; the race is on the rotated ticket. */
        {
            hres r;
            rotate(&r, round % 2 ? p->a : p->b, t.ticket);
            assert_http(&r, 200);
            assert_non_null(jstr(r.json, "ticket"));
            snprintf(t.ticket, sizeof t.ticket, "%s", jstr(r.json, "ticket"));
            hres_free(&r);
        }
        race(rs, RACERS, p->a, p->b, "/v1/tickets/rotate", KEY(P_AGENT),
             ticket_body_for, t.ticket);
        for (int i = 0; i < RACERS; i++) {
            const hres *r = &rs[i].r;
            const char *e = jstr(r->json, "error");
            if (r->status == 200 && jstr(r->json, "ticket")) {
                rotated++;
                secret_add(jstr(r->json, "ticket"));
                snprintf(next, sizeof next, "%s", jstr(r->json, "ticket"));
                assert_str(jstr(r->json, "family"), t.family);
                assert_true(strcmp(next, t.ticket) != 0);
            } else if (r->status == 409 && e &&
                       strcmp(e, "ticket_not_found") == 0) {
                refused++;
            }
        }
        if (rotated != 1 || refused != RACERS - 1)
            race_report("rotation", round, rs, RACERS);
        assert_int_equal(rotated, 1);
        assert_int_equal(refused, RACERS - 1);
        race_free(rs, RACERS);
        /* The replays revoked the family: the rotated ticket is dead too. */
        {
            hres r;
            rotate(&r, p->b, next);
            assert_error(&r, 409, "ticket_not_found");
            hres_free(&r);
        }
    }
}

void ticket_rotated_on_one_instance_is_409_on_the_other(void **state)
{
    pair *p = *state;
    char t1[128];
    ticket t;
    hres r;

    /* Control: a ticket made on A rotates on B, so B sees A's store. */
    ticket_new(p->a, &t);
    rotate(&r, p->b, t.ticket);
    assert_http(&r, 200);
    assert_non_null(jstr(r.json, "ticket"));
    snprintf(t1, sizeof t1, "%s", jstr(r.json, "ticket"));
    hres_free(&r);
    /* Rotated on A, */
    rotate(&r, p->a, t1);
    assert_http(&r, 200);
    assert_non_null(jstr(r.json, "ticket"));
    hres_free(&r);
    /* then presented to B: refused. */
    rotate(&r, p->b, t1);
    assert_error(&r, 409, "ticket_not_found");
    hres_free(&r);
}

void ticket_rotated_before_a_restart_is_409_after_it(void **state)
{
    pair *p = *state;
    ticket t, control;
    hres r;

    ticket_new(p->a, &t);
    ticket_new(p->a, &control);
    rotate(&r, p->a, t.ticket);
    assert_http(&r, 200);
    hres_free(&r);
    assert_int_equal(srv_restart(p->a), 0);
    rotate(&r, p->a, t.ticket);
    assert_error(&r, 409, "ticket_not_found");
    hres_free(&r);
    /* Control: a ticket made before the restart still rotates after it. */
    rotate(&r, p->a, control.ticket);
    assert_http(&r, 200);
    hres_free(&r);
}
