package aws

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// epoch is a timestamp as the JSON protocols send it: seconds since 1970 as a number.
type epoch float64

func epochOf(t time.Time) epoch { return epoch(float64(t.UnixMilli()) / 1000) }

type getSecretValueInput struct {
	SecretID     string `json:"SecretId"`
	VersionID    string `json:"VersionId"`
	VersionStage string `json:"VersionStage"`
}

type getSecretValueOutput struct {
	ARN           string   `json:"ARN"`
	Name          string   `json:"Name"`
	VersionID     string   `json:"VersionId"`
	SecretString  string   `json:"SecretString"`
	VersionStages []string `json:"VersionStages"`
	CreatedDate   epoch    `json:"CreatedDate"`
}

type createSecretInput struct {
	Name         string `json:"Name"`
	SecretString string `json:"SecretString"`
}

type putSecretValueInput struct {
	SecretID     string `json:"SecretId"`
	SecretString string `json:"SecretString"`
}

type secretVersionOutput struct {
	ARN           string   `json:"ARN"`
	Name          string   `json:"Name"`
	VersionID     string   `json:"VersionId"`
	VersionStages []string `json:"VersionStages,omitempty"`
}

// findSecretLocked finds a secret by name, full ARN or partial ARN (without the six-character
// suffix), as Secrets Manager does.
func (s *Server) findSecretLocked(id string) (*secret, error) {
	if id == "" {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterException", "You must provide a SecretId.")
	}
	for _, sec := range s.secrets {
		if id == sec.name || id == sec.arn || id == sec.arn[:len(sec.arn)-7] {
			if s.denied[sec.name] {
				return nil, errorf(http.StatusBadRequest, "AccessDeniedException",
					"User: arn:aws:sts::%s:assumed-role/sf2loki/sf2loki is not authorized to perform: secretsmanager:GetSecretValue on resource: %s because no identity-based policy allows the secretsmanager:GetSecretValue action", Account, id)
			}
			return sec, nil
		}
	}
	return nil, errorf(http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
}

func (s *Server) getSecretValueLocked(in getSecretValueInput) (any, error) {
	sec, err := s.findSecretLocked(in.SecretID)
	if err != nil {
		return nil, err
	}
	stage := in.VersionStage
	if stage == "" && in.VersionID == "" {
		stage = "AWSCURRENT"
	}
	for _, v := range sec.versions {
		if (in.VersionID == "" || v.id == in.VersionID) && (stage == "" || hasStage(v.stages, stage)) {
			return getSecretValueOutput{ARN: sec.arn, Name: sec.name, VersionID: v.id, SecretString: v.value,
				VersionStages: append([]string(nil), v.stages...), CreatedDate: epochOf(v.at)}, nil
		}
	}
	if in.VersionID != "" && stage != "" {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterException", "You provided a VersionStage that is not associated to the provided VersionId.")
	}
	if stage != "" {
		return nil, errorf(http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value for staging label: %s", stage)
	}
	return nil, errorf(http.StatusBadRequest, "ResourceNotFoundException", "Secrets Manager can't find the specified secret value for VersionId: %s", in.VersionID)
}

func (s *Server) createSecretLocked(in createSecretInput) (any, error) {
	if in.Name == "" {
		return nil, errorf(http.StatusBadRequest, "InvalidParameterException", "You must provide a Name.")
	}
	if _, ok := s.secrets[in.Name]; ok {
		return nil, errorf(http.StatusBadRequest, "ResourceExistsException", "The operation failed because the secret %s already exists.", in.Name)
	}
	sec := s.newSecretLocked(in.Name)
	v := s.putVersionLocked(sec, in.SecretString)
	return secretVersionOutput{ARN: sec.arn, Name: sec.name, VersionID: v.id}, nil
}

func (s *Server) putSecretValueLocked(in putSecretValueInput) (any, error) {
	sec, err := s.findSecretLocked(in.SecretID)
	if err != nil {
		return nil, err
	}
	v := s.putVersionLocked(sec, in.SecretString)
	return secretVersionOutput{ARN: sec.arn, Name: sec.name, VersionID: v.id, VersionStages: v.stages}, nil
}

type getParameterInput struct {
	Name           string `json:"Name"`
	WithDecryption bool   `json:"WithDecryption"`
}

type parameterOutput struct {
	ARN              string `json:"ARN"`
	DataType         string `json:"DataType"`
	LastModifiedDate epoch  `json:"LastModifiedDate"`
	Name             string `json:"Name"`
	Selector         string `json:"Selector,omitempty"`
	Type             string `json:"Type"`
	Value            string `json:"Value"`
	Version          int64  `json:"Version"`
}

type putParameterInput struct {
	Name      string `json:"Name"`
	Value     string `json:"Value"`
	Type      string `json:"Type"`
	Overwrite bool   `json:"Overwrite"`
}

func parameterARN(name string) string {
	return fmt.Sprintf("arn:aws:ssm:%s:%s:parameter/%s", Region, Account, strings.TrimPrefix(name, "/"))
}

func (s *Server) getParameterLocked(in getParameterInput) (any, error) {
	name, selector := in.Name, ""
	if rest, ok := strings.CutPrefix(name, "arn:aws:ssm:"); ok {
		_, path, found := strings.Cut(rest, ":parameter/")
		if !found {
			return nil, errorf(http.StatusBadRequest, "ValidationException", "Invalid parameter ARN %q", in.Name)
		}
		name = path
		if _, ok := s.params["/"+path]; ok {
			name = "/" + path
		}
	}
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		name, selector = name[:i], name[i:]
	}
	p := s.params[name]
	if p == nil {
		return nil, errorf(http.StatusBadRequest, "ParameterNotFound", "")
	}
	if s.denied[name] {
		return nil, errorf(http.StatusBadRequest, "AccessDeniedException",
			"User: arn:aws:sts::%s:assumed-role/sf2loki/sf2loki is not authorized to perform: ssm:GetParameter on resource: %s because no identity-based policy allows the ssm:GetParameter action", Account, parameterARN(name))
	}
	version := len(p.versions)
	if selector != "" {
		n, err := strconv.Atoi(selector[1:])
		if err != nil || n < 1 || n > len(p.versions) {
			return nil, errorf(http.StatusBadRequest, "ParameterVersionNotFound", "Systems Manager could not find version %s of %s.", selector[1:], name)
		}
		version = n
	}
	value := p.versions[version-1]
	if p.typ == "SecureString" && !in.WithDecryption {
		value = "AQICAHg" + base64.StdEncoding.EncodeToString([]byte("kms:"+strconv.Itoa(len(value)))) // ciphertext, never the value
	}
	return map[string]parameterOutput{"Parameter": {ARN: parameterARN(name), DataType: "text", LastModifiedDate: epochOf(p.modified),
		Name: name, Selector: selector, Type: p.typ, Value: value, Version: int64(version)}}, nil
}

func (s *Server) putParameterLocked(in putParameterInput) (any, error) {
	if in.Name == "" {
		return nil, errorf(http.StatusBadRequest, "ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
	}
	p := s.params[in.Name]
	if p != nil && !in.Overwrite {
		return nil, errorf(http.StatusBadRequest, "ParameterAlreadyExists", "The parameter already exists. To overwrite this value, set the overwrite option in the request to true.")
	}
	typ := in.Type
	if typ == "" {
		if p == nil {
			return nil, errorf(http.StatusBadRequest, "ValidationException", "A parameter type is required when you create a parameter.")
		}
		typ = p.typ
	}
	if p == nil {
		p = &parameter{name: in.Name}
		s.params[in.Name] = p
	}
	p.typ = typ
	p.versions = append(p.versions, in.Value)
	p.modified = s.now()
	return map[string]any{"Version": len(p.versions), "Tier": "Standard"}, nil
}
