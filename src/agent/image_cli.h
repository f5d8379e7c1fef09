/*
 * image_cli.h - `tessera-agent image-pull` (image_cli.c): argv as main got
 * it, argv[0] being "image-pull". Returns the exit status.
 */
#ifndef TS_AGENT_IMAGE_CLI_H
#define TS_AGENT_IMAGE_CLI_H

int agent_image_cli(int argc, char **argv);

#endif
