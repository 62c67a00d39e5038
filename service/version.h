/* What this build is: the release version (CMake's project version) and the git commit it was
 * configured from. Printed by --version, labelled on rowlock_build_info and answered by /readyz;
 * the schema version beside them belongs to db/schema.h. */
#ifndef SVC_VERSION_H
#define SVC_VERSION_H

extern const char svc_version[]; /* "0.1.0" */
extern const char svc_commit[];  /* short commit hash, or "unknown" */

#endif
