/* Access rules of the usage view: modes, the token file (comparison, rotation, a broken
 * rotation keeping the last good token) and the closed default. The Kubernetes review path
 * is covered end to end (tests/e2e/test_identity.py) against the API simulator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kubequota/serve/auth.h"
#include "kubequota/base/log.h"

static char dir[64];
static char path[128];

static void write_file(const char *p, const char *text)
{
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.tmp", p);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, p), 0); /* a new inode, as a Secret update makes */
}

static int setup(void **state)
{
    (void)state;
    strcpy(dir, "/tmp/kq-auth-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/token", dir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(path);
    rmdir(dir);
    return 0;
}

static int check(kq_auth_t *a, bool cert, const char *hdr)
{
    char why[512];
    return kq_auth_check(a, cert, hdr, why, sizeof(why));
}

static void test_modes_parse(void **state)
{
    (void)state;
    kq_auth_mode_t m;
    assert_int_equal(kq_auth_mode_parse("none", &m), 0);
    assert_int_equal(m, KQ_AUTH_NONE);
    assert_int_equal(kq_auth_mode_parse("kubernetes", &m), 0);
    assert_int_equal(m, KQ_AUTH_KUBERNETES);
    assert_int_equal(kq_auth_mode_parse("default", &m), 0);
    assert_int_equal(m, KQ_AUTH_DEFAULT);
    assert_int_equal(kq_auth_mode_parse("open", &m), KQ_EINVAL);
}

static void test_closed_by_default(void **state)
{
    (void)state;
    char err[256];
    kq_auth_opts_t o = {.mode = KQ_AUTH_DEFAULT};
    kq_auth_t *a = kq_auth_new(&o, err, sizeof(err));
    assert_non_null(a);
    assert_true(kq_auth_closed(a));
    char why[512];
    assert_int_equal(kq_auth_check(a, false, "Bearer x", why, sizeof(why)), 401);
    assert_non_null(strstr(why, "--rest-token-file"));
    kq_auth_free(a);

    o.mode = KQ_AUTH_NONE;
    a = kq_auth_new(&o, err, sizeof(err));
    assert_false(kq_auth_closed(a));
    assert_int_equal(check(a, false, NULL), 200);
    kq_auth_free(a);
}

static void test_client_certificate(void **state)
{
    (void)state;
    char err[256];
    kq_auth_opts_t o = {.mode = KQ_AUTH_DEFAULT, .client_certs = true};
    kq_auth_t *a = kq_auth_new(&o, err, sizeof(err));
    assert_int_equal(check(a, true, NULL), 200);
    assert_int_equal(check(a, false, NULL), 401);
    kq_auth_free(a);
}

static void test_token_file(void **state)
{
    (void)state;
    char err[256];
    write_file(path, "  s3cret-token\n");
    kq_auth_opts_t o = {.mode = KQ_AUTH_DEFAULT, .token_file = path};
    kq_auth_t *a = kq_auth_new(&o, err, sizeof(err));
    assert_non_null(a);
    assert_false(kq_auth_closed(a));
    assert_int_equal(check(a, false, "Bearer s3cret-token"), 200);
    assert_int_equal(check(a, false, "bearer s3cret-token"), 200); /* the scheme is case-insensitive */
    assert_int_equal(check(a, false, "Bearer s3cret-toke"), 401);
    assert_int_equal(check(a, false, "Bearer s3cret-token2"), 401);
    assert_int_equal(check(a, false, "Basic czNjcmV0"), 401);
    assert_int_equal(check(a, false, NULL), 401);
    assert_int_equal(check(a, true, NULL), 401); /* a certificate counts only with --client-ca */

    /* rotation: the new token works, the old one stops */
    write_file(path, "rotated\n");
    assert_int_equal(check(a, false, "Bearer rotated"), 200);
    assert_int_equal(check(a, false, "Bearer s3cret-token"), 401);

    /* a broken rotation (empty file) keeps the last good token */
    write_file(path, "\n");
    assert_int_equal(check(a, false, "Bearer rotated"), 200);
    kq_auth_free(a);
}

static void test_bad_token_files(void **state)
{
    (void)state;
    char err[256] = "";
    kq_auth_opts_t o = {.mode = KQ_AUTH_DEFAULT, .token_file = "/nonexistent/kq-token"};
    assert_null(kq_auth_new(&o, err, sizeof(err)));
    assert_non_null(strstr(err, "/nonexistent/kq-token"));
    write_file(path, " \n\t\n");
    o.token_file = path;
    assert_null(kq_auth_new(&o, err, sizeof(err)));
    assert_non_null(strstr(err, "empty"));
    o = (kq_auth_opts_t){.mode = KQ_AUTH_KUBERNETES}; /* no API client */
    assert_null(kq_auth_new(&o, err, sizeof(err)));
    assert_non_null(strstr(err, "kubernetes"));
}

int main(void)
{
    kq_log_level_current = KQ_LOG_ERROR;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes_parse),
        cmocka_unit_test(test_closed_by_default),
        cmocka_unit_test(test_client_certificate),
        cmocka_unit_test_setup_teardown(test_token_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_token_files, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
