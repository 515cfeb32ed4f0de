// gRPC server reflection (v1 and v1alpha), answered from the descriptors protobuf-es generated,
// so `buf curl` and grpcurl work against a service without local protos.
import { createRegistry, toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ServerReflection as ReflectionV1,
  type ServerReflectionRequest,
} from "@switchyard/gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ReflectionV1Alpha } from "@switchyard/gen/grpc/reflection/v1alpha/reflection_pb.js";

const NOT_FOUND = 5;

function withDependencies(file: DescFile, seen = new Set<string>()): DescFile[] {
  if (seen.has(file.name)) return [];
  seen.add(file.name);
  return [file, ...file.dependencies.flatMap((dep) => withDependencies(dep, seen))];
}

function answer(services: DescService[], request: ServerReflectionRequest) {
  const files = services.flatMap((s) => withDependencies(s.file));
  const registry = createRegistry(...files);
  const byName = new Map(files.map((f) => [f.proto.name, f]));
  const fileResponse = (file: DescFile | undefined) =>
    file
      ? {
          case: "fileDescriptorResponse" as const,
          value: {
            fileDescriptorProto: withDependencies(file).map((f) => toBinary(FileDescriptorProtoSchema, f.proto)),
          },
        }
      : { case: "errorResponse" as const, value: { errorCode: NOT_FOUND, errorMessage: "not found" } };
  const req = request.messageRequest;
  switch (req.case) {
    case "listServices":
      return { case: "listServicesResponse" as const, value: { service: services.map((s) => ({ name: s.typeName })) } };
    case "fileByFilename":
      return fileResponse(byName.get(req.value));
    case "fileContainingSymbol": {
      const symbol = req.value;
      const direct = registry.get(symbol);
      if (direct) return fileResponse(direct.file);
      // A method name: "<service>.<Method>".
      const service = registry.getService(symbol.slice(0, symbol.lastIndexOf(".")));
      return fileResponse(service?.file);
    }
    case "allExtensionNumbersOfType":
      return { case: "allExtensionNumbersResponse" as const, value: { baseTypeName: req.value, extensionNumber: [] } };
    default:
      return {
        case: "errorResponse" as const,
        value: { errorCode: NOT_FOUND, errorMessage: "unsupported reflection request" },
      };
  }
}

/** Reflection handlers for both protocol versions, describing `services` (and reflection itself). */
export function reflectionImpls(services: DescService[]) {
  const all = [...services, ReflectionV1, ReflectionV1Alpha];
  const v1: ServiceImpl<typeof ReflectionV1> = {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        yield { validHost: request.host, originalRequest: request, messageResponse: answer(all, request) };
      }
    },
  };
  const v1alpha: ServiceImpl<typeof ReflectionV1Alpha> = {
    async *serverReflectionInfo(requests) {
      for await (const request of requests) {
        // v1alpha has the same field numbers and shapes as v1.
        const response = answer(all, request as unknown as ServerReflectionRequest);
        yield { validHost: request.host, originalRequest: request, messageResponse: response as never };
      }
    },
  };
  return { v1, v1alpha };
}

export { ReflectionV1, ReflectionV1Alpha };
