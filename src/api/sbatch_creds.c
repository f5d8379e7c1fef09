/*
 * sbatch_creds.c - which exported variables look like credentials
 * (docs/slurm.md "Credentials in the environment").
 *
 * Slurm's --export=ALL copies the submitting shell into the job; in Tessera
 * a job's environment is stored with it and read by its owner and admins,
 * so a cloud key in a researcher's shell would end up in the store and its
 * backups. Names matching these patterns (compared in upper case) are left
 * out of ALL with a warning, and refused when --export names them, unless
 * they are passed as secrets (tessera sbatch --secret NAME), which the
 * controller keeps encrypted and hands to the task only when it starts.
 */
#include <ctype.h>
#include <string.h>

#include "api/sbatch_req.h"
#include "api/spec_scalar.h"

/* *_TOKEN, *SECRET*, *_API_KEY, *APIKEY*, *PASSWORD*, *PASSWD*, *_PRIVATE_KEY,
 * *_ACCESS_KEY*: AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, HF_TOKEN,
 * GITHUB_TOKEN, WANDB_API_KEY, OPENAI_API_KEY, PGPASSWORD among them. */
bool sbatch_env_credential(const char *name)
{
    char up[TS_SPEC_ENV_NAME_MAX];
    size_t n = strlen(name);
    if (n >= sizeof up)
        return false;
    for (size_t i = 0; i <= n; i++)
        up[i] = (char)toupper((unsigned char)name[i]);
    static const char *const SUFFIXES[] = {"_TOKEN", "_API_KEY", "_PRIVATE_KEY"};
    static const char *const PARTS[] = {"SECRET", "APIKEY", "PASSWORD", "PASSWD", "_ACCESS_KEY"};
    for (size_t i = 0; i < sizeof SUFFIXES / sizeof SUFFIXES[0]; i++) {
        size_t sl = strlen(SUFFIXES[i]);
        if (n >= sl && strcmp(up + n - sl, SUFFIXES[i]) == 0)
            return true;
    }
    for (size_t i = 0; i < sizeof PARTS / sizeof PARTS[0]; i++)
        if (strstr(up, PARTS[i]))
            return true;
    return strcmp(up, "TOKEN") == 0;
}
