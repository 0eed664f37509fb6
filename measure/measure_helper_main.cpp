// Owns the tessera-measure program: the measuring helper a tune starts (measure_helper.h).
#include "measure/measure_helper.h"

int main(int argc, char** argv) { return tessera::measure::measureHelperMain(argc, argv); }
