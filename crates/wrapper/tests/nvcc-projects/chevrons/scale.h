// Found next to main.cu: quoted includes of a rewritten source still resolve here.
#define SCALE 3
