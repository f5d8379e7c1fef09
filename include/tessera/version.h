/*
 * version.h - the one version number every Tessera program prints for
 * --version and the Debian packages carry (debian/changelog; the CLI's
 * CLI_VERSION is the same number). Bump them together.
 */
#ifndef TESSERA_VERSION_H
#define TESSERA_VERSION_H

#define TS_VERSION "0.1.0"

#endif
