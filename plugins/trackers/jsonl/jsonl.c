/* jsonl.c: the `jsonl` tracker. Appends one JSON object per log call to a file, e.g.
 *   {"step":40,"loss":2.3456000000000001,"lr":0.001}
 * Written in plain C99 against <loom/abi.h> alone, with no C++ helpers: it is the proof that a
 * torch-free plugin needs nothing but the C header, and it keeps loading across LibTorch
 * upgrades. Only rank 0 writes; other ranks get an instance that does nothing.
 *
 * Resume: resume(N) rewrites the file keeping only the records whose "step" <= N (a temp file
 * in the same folder, fsync'd, renamed over the old one), so no step repeats or goes back. A
 * session whose first log comes without a resume() call (a restart with no checkpoint) drops
 * the records at or after its first step the same way. Torn last lines are dropped too. */
#define _POSIX_C_SOURCE 200809L /* getline, fileno, fsync */
#include <loom/abi.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const loom_host_api* host; /* static; set by loom_plugin_init */

struct loom_tracker {
  FILE* file;  /* NULL on ranks other than 0 */
  char* path;  /* owned */
  int started; /* resume() or the first log has trimmed the file */
};

/* A status whose message is "jsonl: <what> '<path>': <errno text>". */
static loom_status* io_error(loom_status_code code, const char* what, const char* path, int err) {
  char message[1024];
  snprintf(message, sizeof message, "jsonl: %s '%s': %s", what, path, strerror(err));
  return host->status_create(code, message);
}

static char* join_path(const char* dir, const char* name) {
  size_t dir_len = (dir != NULL && name[0] != '/') ? strlen(dir) : 0;
  size_t name_len = strlen(name);
  char* out = (char*)malloc(dir_len + 1 + name_len + 1);
  if (out == NULL) return NULL;
  if (dir_len > 0) {
    memcpy(out, dir, dir_len);
    out[dir_len++] = '/';
  }
  memcpy(out + dir_len, name, name_len + 1);
  return out;
}

static void jsonl_destroy(loom_tracker* tracker) {
  if (tracker == NULL) return;
  if (tracker->file != NULL) fclose(tracker->file);
  free(tracker->path);
  free(tracker);
}

static loom_status* jsonl_create(const loom_context* context, const loom_config* config,
                                 loom_tracker** out) {
  /* The host fills the context: fields beyond its struct_size are absent. */
  int32_t rank = LOOM_STRUCT_HAS(context, loom_context, rank) ? context->rank : 0;
  const char* run_dir = LOOM_STRUCT_HAS(context, loom_context, run_dir) ? context->run_dir : NULL;
  const char* name = NULL;
  loom_tracker* tracker;
  loom_status* status;

  *out = NULL;
  status = host->config_get_string(config, "path", &name);
  if (status != NULL) return status;
  if (name == NULL || name[0] == '\0')
    return host->status_create(LOOM_STATUS_CODE_INVALID_ARGUMENT,
                               "jsonl: path is empty; set it to a file name such as \"metrics.jsonl\"");

  tracker = (loom_tracker*)calloc(1, sizeof *tracker);
  if (tracker == NULL) return host->status_create(LOOM_STATUS_CODE_INTERNAL, "jsonl: out of memory");
  tracker->path = join_path(run_dir, name);
  if (tracker->path == NULL) {
    jsonl_destroy(tracker);
    return host->status_create(LOOM_STATUS_CODE_INTERNAL, "jsonl: out of memory");
  }
  if (rank == 0) {
    /* Append, so a resumed run continues the same file. */
    tracker->file = fopen(tracker->path, "a");
    if (tracker->file == NULL) {
      status = io_error(LOOM_STATUS_CODE_INVALID_ARGUMENT, "cannot open", tracker->path, errno);
      jsonl_destroy(tracker);
      return status;
    }
  }
  *out = tracker;
  return NULL;
}

/* Writes name as a JSON string: quotes, backslashes and control characters escaped. */
static void write_json_string(FILE* f, const char* s) {
  fputc('"', f);
  for (; *s != '\0'; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void write_number(FILE* f, double v) {
  if (isfinite(v)) fprintf(f, "%.17g", v); /* round-trips every double */
  else fputs("null", f);                   /* JSON has no NaN or Infinity */
}

/* Keeps only the whole lines whose "step" <= last_step; rewrites nothing when none is dropped. */
static loom_status* jsonl_keep_until(loom_tracker* tracker, int64_t last_step) {
  char *tmp = NULL, *line = NULL;
  size_t cap = 0, dropped = 0;
  ssize_t len;
  long long step;
  FILE *in = NULL, *out = NULL;
  loom_status* status = NULL;

  tracker->started = 1;
  if (tracker->file == NULL) return NULL; /* not rank 0 */
  tmp = (char*)malloc(strlen(tracker->path) + 5);
  if (tmp == NULL) return host->status_create(LOOM_STATUS_CODE_INTERNAL, "jsonl: out of memory");
  sprintf(tmp, "%s.tmp", tracker->path);
  in = fopen(tracker->path, "r");
  out = fopen(tmp, "w");
  if (in == NULL || out == NULL) {
    status = io_error(LOOM_STATUS_CODE_INTERNAL, "cannot rewrite", tracker->path, errno);
    goto done;
  }
  while ((len = getline(&line, &cap, in)) > 0) {
    if (line[len - 1] == '\n' && sscanf(line, "{\"step\":%lld", &step) == 1 && step <= last_step) fputs(line, out);
    else ++dropped;
  }
  if (ferror(in) || ferror(out) || fflush(out) != 0 || fsync(fileno(out)) != 0) {
    status = io_error(LOOM_STATUS_CODE_INTERNAL, "cannot rewrite", tracker->path, errno);
    goto done;
  }
  if (dropped > 0) {
    fclose(tracker->file); /* it would keep appending to the replaced file */
    tracker->file = NULL;
    if (rename(tmp, tracker->path) != 0) status = io_error(LOOM_STATUS_CODE_INTERNAL, "cannot replace", tracker->path, errno);
    tracker->file = fopen(tracker->path, "a");
    if (tracker->file == NULL && status == NULL) status = io_error(LOOM_STATUS_CODE_INTERNAL, "cannot open", tracker->path, errno);
  }
done:
  if (in != NULL) fclose(in);
  if (out != NULL) fclose(out);
  remove(tmp); /* already gone when renamed */
  free(tmp);
  free(line);
  return status;
}

static loom_status* jsonl_resume(loom_tracker* tracker, int64_t step) { return jsonl_keep_until(tracker, step); }

static loom_status* jsonl_log(loom_tracker* tracker, const loom_metrics* metrics) {
  int64_t step = LOOM_STRUCT_HAS(metrics, loom_metrics, step) ? metrics->step : 0;
  size_t count = LOOM_STRUCT_HAS(metrics, loom_metrics, count) ? metrics->count : 0;
  const loom_metric* const* items = LOOM_STRUCT_HAS(metrics, loom_metrics, items) ? metrics->items : NULL;
  FILE* f = tracker->file;
  size_t i;

  if (f == NULL) return NULL; /* not rank 0 */
  if (!tracker->started) {
    loom_status* status = jsonl_keep_until(tracker, step - 1);
    if (status != NULL) return status;
    f = tracker->file;
    if (f == NULL) return NULL;
  }
  fprintf(f, "{\"step\":%lld", (long long)step);
  for (i = 0; items != NULL && i < count; ++i) {
    const loom_metric* m = items[i];
    if (m == NULL || !LOOM_STRUCT_HAS(m, loom_metric, value) || m->name == NULL) continue;
    fputc(',', f);
    write_json_string(f, m->name);
    fputc(':', f);
    write_number(f, m->value);
  }
  fputs("}\n", f);
  /* Flush every line so a crash or preemption loses nothing already logged. */
  if (fflush(f) != 0 || ferror(f)) {
    int err = errno;
    clearerr(f);
    return io_error(LOOM_STATUS_CODE_INTERNAL, "cannot write", tracker->path, err);
  }
  return NULL;
}

static const loom_option_spec jsonl_options[] = {
    {.struct_size = sizeof(loom_option_spec),
     .name = "path",
     .type = LOOM_OPTION_TYPE_STRING,
     .default_value = "metrics.jsonl",
     .required = 0,
     .doc = "File to append to; a relative path is inside the run directory."},
};

/* Fields left out (note, state_save, state_load) are NULL: this tracker does not have them. */
static const loom_tracker_vtable jsonl_vtable = {
    .struct_size = sizeof(loom_tracker_vtable),
    .create = jsonl_create,
    .destroy = jsonl_destroy,
    .log = jsonl_log,
    .resume = jsonl_resume,
};

static const loom_component jsonl_component = {
    .struct_size = sizeof(loom_component),
    .kind = LOOM_KIND_TRACKER,
    .name = "jsonl",
    .summary = "Appends every logged metric to a JSON Lines file.",
    .options = jsonl_options,
    .option_count = sizeof jsonl_options / sizeof jsonl_options[0],
    .vtable = &jsonl_vtable,
};

static loom_status* register_components(loom_registry* registry) {
  return host->registry_add_component(registry, &jsonl_component);
}

static const loom_plugin_info jsonl_info = {
    .struct_size = sizeof(loom_plugin_info),
    .abi_major = LOOM_ABI_MAJOR,
    .abi_minor = LOOM_ABI_MINOR,
    .name = "jsonl",
    .version = "0.1.0",
    .torch_fingerprint = NULL, /* torch-free */
    .register_components = register_components,
};

LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h); /* the one export */
LOOM_EXPORT const loom_plugin_info* loom_plugin_init(const loom_host_api* h) {
  host = h;
  return &jsonl_info;
}
