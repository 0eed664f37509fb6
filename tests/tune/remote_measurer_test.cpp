// Tests that the remote measurer reports its own failure as a value across the Measurer interface
// (measure/measurer.h): a service it cannot reach ends the batch with an Unavailable error that
// says what failed, the line the front end prints. The negative control is in each assertion: a
// failure thrown across the interface fails EXPECT_NO_THROW, and one dropped (results returned as
// if the batch had been measured) fails ASSERT_FALSE(ok()).
#include <gtest/gtest.h>

#include <optional>

#include "ir/builders.h"
#include "measure/remote_measurer.h"

using namespace tessera;
using namespace tessera::measure;

namespace {

std::unique_ptr<Measurer> unreachable() {
  ir::ElementwiseSpec spec;
  spec.expr = "y = x * 2 + z";
  spec.shape = {1000};
  RemoteSettings s;
  s.service.urls = {"http://127.0.0.1:1"};  // nothing listens on port 1
  s.service.timeout_s = 0.5;
  s.service.patience_s = 0.5;
  s.noWorkerTimeoutSec = 1;
  return makeRemoteMeasurer(*ir::buildElementwise(spec), WorkerTarget{hostTarget(), "test CPU", 1}, s);
}

}  // namespace

TEST(RemoteMeasurer, AServiceThatCannotBeReachedIsAnErrorValue) {
  auto m = unreachable();
  std::optional<Expected<std::vector<TrialResult>>> r;
  EXPECT_NO_THROW(r.emplace(m->measure({ir::Config{}})));
  ASSERT_TRUE(r.has_value());
  ASSERT_FALSE(r->ok()) << "a failed submission came back as " << (*r)->size() << " results";
  EXPECT_EQ(r->error().code, ErrorCode::Unavailable);
  EXPECT_EQ(r->error().message.rfind("submitting a measurement job: ", 0), 0u) << r->error().message;

  std::optional<Expected<std::vector<TrialResult>>> again;
  EXPECT_NO_THROW(again.emplace(m->remeasure({ir::Config{}}, 2)));
  ASSERT_TRUE(again.has_value());
  ASSERT_FALSE(again->ok());
  EXPECT_EQ(again->error().code, ErrorCode::Unavailable);
  EXPECT_EQ(again->error().message.rfind("submitting a measurement job: ", 0), 0u) << again->error().message;
}
