/*
 * run.c — one way to choose the tests a program runs, for every cmocka
 * program: OG_TEST_FILTER, a glob on the test name, applied with
 * cmocka_set_test_filter().
 *
 * cmocka 1.1 runs a group whose filter matches nothing as a success: "0
 * test(s) run", "[  PASSED  ] 0 test(s)", exit 0, after running the group
 * setup. A misspelt filter would then look like a passing test, so the
 * matches are counted here first, with the same matching cmocka applies,
 * and none is an error that lists the names there are.
 */
#include <stdio.h>
#include <stdlib.h>

#include "support.h"

const char *t_filter(void)
{
    const char *f = getenv("OG_TEST_FILTER");

    return f && *f ? f : NULL;
}

/* cmocka's matching (c_strmatch in cmocka.c), so that the count here and
 * the tests cmocka runs agree: '*' matches any run of characters, '?' one
 * character, every other character itself. */
bool t_glob_match(const char *name, const char *pattern)
{
    for (;;) {
        if (*pattern == '\0')
            return *name == '\0';
        if (*pattern == '*') {
            pattern++;
            if (*pattern == '\0')
                return true;
            for (; *name != '\0'; name++)
                if (t_glob_match(name, pattern))
                    return true;
            return false;
        }
        if (*name == '\0')
            return false;
        if (*pattern != '?' && *pattern != *name)
            return false;
        pattern++;
        name++;
    }
}

int t_run_group(const char *group, const struct CMUnitTest *tests, size_t n,
                CMFixtureFunction setup, CMFixtureFunction teardown)
{
    const char *filter = t_filter();
    size_t matched = 0;

    if (filter) {
        for (size_t i = 0; i < n; i++)
            matched += t_glob_match(tests[i].name, filter);
        if (matched == 0) {
            fprintf(stderr,
                    "OG_TEST_FILTER='%s' matches none of the %zu tests of %s;"
                    " they are:\n",
                    filter, n, group);
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, "  %s\n", tests[i].name);
            return 1;
        }
        fprintf(stderr, "OG_TEST_FILTER='%s': %zu of the %zu tests of %s\n",
                filter, matched, n, group);
        cmocka_set_test_filter(filter);
    }
    return _cmocka_run_group_tests(group, tests, n, setup, teardown);
}
